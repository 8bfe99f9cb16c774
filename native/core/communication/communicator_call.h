// CommunicatorCall: GroupCall through an external::Communicator: NCCL for a group of distinct
// GPUs in this process, c10d's Gloo for CPU tensors of several processes. Each call prepares its
// buffers (padding uneven torch.chunk pieces to the largest, since communicators move equal
// blocks), meets the group's in-process peers on the host when it has a rendezvous (so that a GPU
// collective is never launched by only some of its participants: a failed or timed-out peer
// turns into an error, not a hung GPU), then runs the call. NCCL queues it on the current stream
// and returns at once; Gloo returns when it is done. Cross-process groups have no rendezvous:
// c10d reports failed and timed-out peers itself.
#pragma once
#include <functional>
#include <memory>

#include "core/communication/group_call.h"
#include "external/communicator.h"

namespace dtorch::core {

class CommunicatorCall final : public GroupCall {
 public:
  // Creating a group is itself a collective, so `open` runs in the first call that communicates,
  // which every participant makes at the same point. `rendezvous` may be null (no meeting).
  using Open = std::function<std::shared_ptr<external::Communicator>()>;
  CommunicatorCall(Rendezvous* rendezvous, int position, int size, Open open, std::chrono::milliseconds timeout)
      : GroupCall(position, size), rendezvous_(rendezvous), open_(std::move(open)), timeout_(timeout) {}
  at::Tensor allGather(const at::Tensor& local, int64_t dim, int64_t gatheredSize) override;
  at::Tensor allReduce(const at::Tensor& local, ReduceOp op) override;
  at::Tensor reduceScatter(const at::Tensor& local, ReduceOp op, int64_t dim) override;
  at::Tensor allToAll(const at::Tensor& local, int64_t splitDim, int64_t concatDim, int64_t concatSize) override;
  at::Tensor shift(const at::Tensor& local, int64_t incomingNumel) override;

 private:
  // Waits until every in-process participant has its buffers ready for the same `call`; throws
  // if one failed, timed out, or is about to make another call. Nothing without a rendezvous.
  void meetPeers(int call);
  external::Communicator& comm();

  Rendezvous* rendezvous_;
  Open open_;
  std::shared_ptr<external::Communicator> comm_;  // open_'s, from the first call on
  std::chrono::milliseconds timeout_;
};

}  // namespace dtorch::core
