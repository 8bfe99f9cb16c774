// PullCall: collectives as pulls. Each participant deposits its piece at the group's rendezvous
// and copies what it needs straight from its peers' deposits: on CPU workers a memcpy from
// shared memory, on GPUs the copy engines (no SMs, so they run beside compute kernels; Hopper's
// matmuls hold every SM while they run, which keeps an NCCL kernel waiting), after each
// producer's ready marker, holding the peer buffers until the copies are done. Reductions add
// the pulled parts in group order, so every participant gets bit-identical results; a
// `reducing` call (NCCL) takes the reductions and ring passes instead when given.
#pragma once
#include <memory>
#include <vector>

#include "core/communication/group_call.h"

namespace dtorch::core {

class PullCall final : public GroupCall {
 public:
  PullCall(Rendezvous& rendezvous, int position, std::unique_ptr<GroupCall> reducing, std::chrono::milliseconds timeout)
      : GroupCall(position, rendezvous.size()), rendezvous_(rendezvous), reducing_(std::move(reducing)), timeout_(timeout) {}
  at::Tensor allGather(const at::Tensor& local, int64_t dim, int64_t gatheredSize) override;
  at::Tensor allReduce(const at::Tensor& local, ReduceOp op) override;
  at::Tensor reduceScatter(const at::Tensor& local, ReduceOp op, int64_t dim) override;
  at::Tensor allToAll(const at::Tensor& local, int64_t splitDim, int64_t concatDim, int64_t concatSize) override;
  at::Tensor shift(const at::Tensor& local, int64_t incomingNumel) override;
  // Pulls (copy engines on GPUs) even where reductions otherwise go through NCCL: the point is
  // to keep the SMs for the matmuls that `use` / `fill` queue meanwhile.
  void allGatherEach(const at::Tensor& local, int64_t dim, int64_t gatheredSize, const PieceFn& use) override;
  at::Tensor reduceScatterFilled(at::IntArrayRef shape, const at::TensorOptions& options, int64_t dim, const PieceFn& fill) override;

 private:
  // Deposits `mine` and returns, for every participant p that `wanted(p)`, `take(p, theirs)`:
  // on a GPU copied into `into(p, source)` (the peers' buffers are held until the copies are
  // done), on CPU workers read in place. `algorithm` is checked at the meeting. On a GPU,
  // `landed(p, copy)` runs right after p's copy is queued (to mark it); `readyFor` goes with the
  // deposit (Contribution::readyFor).
  template <typename Wanted, typename Take, typename Into>
  std::vector<at::Tensor> pull(int algorithm, const at::Tensor& mine, Wanted&& wanted, Take&& take, Into&& into,
                               const PieceFn& landed = {}, std::vector<std::shared_ptr<void>> readyFor = {});

  Rendezvous& rendezvous_;
  std::unique_ptr<GroupCall> reducing_;  // may be null
  std::chrono::milliseconds timeout_;
};

}  // namespace dtorch::core
