// NcclCall: GroupCall through NCCL, for a group of distinct GPUs in this process. Each call
// prepares its buffers (padding uneven torch.chunk pieces to the largest, since NCCL moves equal
// blocks), meets the group on the host (so that a GPU collective is never launched by only some
// of its participants: a failed or timed-out peer turns into an error, not a hung GPU), then
// queues the NCCL call on the current stream and returns without waiting for it.
#pragma once
#include <vector>

#include "core/communication/group_call.h"
#include "external/nccl/communicator.h"

namespace dtorch::core {

class NcclCall final : public GroupCall {
 public:
  NcclCall(Rendezvous& rendezvous, int position, std::vector<int> devices, std::chrono::milliseconds timeout)
      : GroupCall(position, static_cast<int>(devices.size())), rendezvous_(rendezvous), devices_(std::move(devices)), timeout_(timeout) {}
  at::Tensor allGather(const at::Tensor& local, int64_t dim, int64_t gatheredSize) override;
  at::Tensor allReduce(const at::Tensor& local, ReduceOp op) override;
  at::Tensor reduceScatter(const at::Tensor& local, ReduceOp op, int64_t dim) override;
  at::Tensor allToAll(const at::Tensor& local, int64_t splitDim, int64_t concatDim, int64_t concatSize) override;
  at::Tensor shift(const at::Tensor& local, int64_t incomingNumel) override;

 private:
  // Waits until every participant has its buffers ready for the same `call`; throws if one
  // failed, timed out, or is about to make another call.
  void meetPeers(int call);
  external::nccl::Communicator& comm();

  Rendezvous& rendezvous_;
  std::vector<int> devices_;  // CUDA device of each participant, in group order
  std::chrono::milliseconds timeout_;
};

}  // namespace dtorch::core
