// ClusterMembership: this process's place in a cluster. While a cluster runs, the device indices
// of a mesh are cluster-wide, one numbering per kind: the main program's (node 0's) devices
// first, as they are numbered on its host, then each worker's in join order. This table says
// which node holds each of them and which device of its host it is, and holds the rendezvous
// store where c10d process groups meet. Outside a cluster every device is this process's own.
// Written on the JS thread; read by the controller and the workers.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/operand/mesh.h"

namespace dtorch::external::torch {
class RendezvousStore;
}

namespace dtorch::core {

struct ClusterDevice {
  Device device;     // kind and cluster-wide index
  int node = 0;      // the node that holds it
  int localIndex = 0;  // its index on that node's host (cpu:N, cuda:N there)
};

class ClusterMembership {
 public:
  static ClusterMembership& instance();

  // Joins cluster `epoch` as node `thisNode` (0: the main program).
  // `host`: the address this node's Gloo binds and gives its peers (empty: c10d's choice).
  void join(int thisNode, uint64_t epoch, std::shared_ptr<external::torch::RendezvousStore> store, std::string host);
  // Adds devices; throws INVALID_ARGUMENT for one already known (an index held twice).
  void addDevices(const std::vector<ClusterDevice>& devices);
  void markLost(int node);
  // Back to a process of its own (the cluster ended).
  void leave();

  bool active() const;
  int thisNode() const;
  uint64_t epoch() const;
  // The node that holds `device`: this one outside a cluster, -1 when no node has it.
  int nodeOf(const Device& device) const;
  bool isLocal(const Device& device) const { return nodeOf(device) == thisNode(); }
  bool isLost(int node) const;
  // Every rank of `mesh` is on this node (always, outside a cluster).
  bool holdsAll(const DeviceMesh& mesh) const;
  // The nodes other than this one that hold a device, in order.
  std::vector<int> otherNodes() const;
  // The device of this host a local cluster device is (the same outside a cluster).
  Device localDevice(const Device& device) const;
  std::shared_ptr<external::torch::RendezvousStore> store() const;
  std::string host() const;
  std::vector<ClusterDevice> devices() const;
  // "node 2's cpu:1" for errors; "cpu:3" outside a cluster.
  std::string describe(const Device& device) const;

 private:
  using Key = std::pair<int, int>;  // kind, cluster-wide index
  static Key keyOf(const Device& d) { return {static_cast<int>(d.kind), d.index}; }

  mutable std::mutex mutex_;
  bool active_ = false;
  int thisNode_ = 0;
  uint64_t epoch_ = 0;
  std::shared_ptr<external::torch::RendezvousStore> store_;
  std::string host_;
  std::map<Key, ClusterDevice> devices_;
  std::set<int> lost_;
};

}  // namespace dtorch::core
