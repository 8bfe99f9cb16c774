// PeerCopyCall: the data-movement collectives of a group of GPUs in this process done by their
// copy engines: each participant pulls what it needs straight from its peers' buffers
// (all-gather: every piece; all-to-all: its chunk of every peer's piece) on its current stream,
// after the producers' ready markers. Copy engines take no SMs, so these run beside compute
// kernels (Hopper's matmuls hold every SM while they run, which keeps an NCCL kernel waiting).
// Peer buffers are held until the copies that read them are done. Reductions and ring passes
// go to `reducing` (NCCL).
#pragma once
#include <memory>
#include <vector>

#include "core/communication/group_call.h"

namespace dtorch::core {

class PeerCopyCall final : public GroupCall {
 public:
  PeerCopyCall(Rendezvous& rendezvous, int position, std::vector<int> devices, std::unique_ptr<GroupCall> reducing,
               std::chrono::milliseconds timeout)
      : rendezvous_(rendezvous), position_(position), devices_(std::move(devices)), reducing_(std::move(reducing)), timeout_(timeout) {}
  at::Tensor allGather(const at::Tensor& local, int64_t dim, int64_t gatheredSize) override;
  at::Tensor allReduce(const at::Tensor& local, ReduceOp op) override { return reducing_->allReduce(local, op); }
  at::Tensor reduceScatter(const at::Tensor& local, ReduceOp op, int64_t dim) override {
    return reducing_->reduceScatter(local, op, dim);
  }
  at::Tensor allToAll(const at::Tensor& local, int64_t splitDim, int64_t concatDim, int64_t concatSize) override;
  at::Tensor shift(const at::Tensor& local, int64_t incomingNumel) override { return reducing_->shift(local, incomingNumel); }

 private:
  int size() const { return static_cast<int>(devices_.size()); }
  // Deposits `mine`, pulls `take(p, theirs)` of every participant p into `into(p)`, holds the
  // peers' buffers until the copies are done, leaves. `algorithm` is checked at the meeting.
  template <typename Take, typename Into>
  void pull(int algorithm, const at::Tensor& mine, Take&& take, Into&& into);

  Rendezvous& rendezvous_;
  int position_;
  std::vector<int> devices_;
  std::unique_ptr<GroupCall> reducing_;
  std::chrono::milliseconds timeout_;
};

}  // namespace dtorch::core
