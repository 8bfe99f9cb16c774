// RemoteWaits: the main node's reads and syncs that another node answers. A read of a tensor
// whose answering rank (rank 0 of its mesh) is on a worker waits here for that worker's kRead
// payload; a sync waits for every worker's kSynced as well as this process's own workers. A lost
// node, a worker that rejected its stream, or the cluster's end fails every wait still open,
// naming the node: nothing waits on a node that will not answer.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/program/completion.h"

namespace dtorch::core {

class RemoteWaits {
 public:
  // The read recorded as node `seq` is answered by node `node`.
  void expectRead(uint64_t seq, int node, std::shared_ptr<Completion> completion);
  // A sync waits for this process's workers and for `remoteNodes` other nodes: the returned
  // completion is the local part (record the sync with it), then expectSynced names the nodes.
  static std::shared_ptr<Completion> splitSync(std::shared_ptr<Completion> completion, size_t remoteNodes);
  void expectSynced(uint64_t seq, const std::vector<int>& nodes, std::shared_ptr<Completion> completion);
  // A worker's answer; an answer nothing waits for is ignored (its wait failed already).
  void answer(int node, uint64_t seq, FetchResult&& result);
  // Fails every open wait (lost node or rejected stream: all of them may depend on it).
  void failAll(const std::string& code, const std::string& message);
  size_t pending() const;

 private:
  struct Wait {
    std::shared_ptr<Completion> completion;
    std::set<int> nodes;  // still to answer
  };

  mutable std::mutex mutex_;
  std::map<uint64_t, Wait> waits_;
};

}  // namespace dtorch::core
