#include "core/communication/pull_call.h"

#include <ATen/ATen.h>

#include "common/error.h"
#include "core/operand/layout.h"
#include "external/cuda/device_sync.h"

namespace dtorch::core {

namespace {
// What each participant is about to do, checked at the meeting (Rendezvous algorithms).
enum Pull : int { kPullAllGather = 101, kPullAllToAll, kPullAllReduce, kPullReduceScatter, kPullShift, kPullAllGatherEach, kPullReduceScatterFilled };
const auto everyone = [](int) { return true; };
const auto whole = [](int, const at::Tensor& theirs) { return theirs; };
}  // namespace

template <typename Wanted, typename Take, typename Into>
std::vector<at::Tensor> PullCall::pull(int algorithm, const at::Tensor& mine, Wanted&& wanted, Take&& take, Into&& into,
                                       const PieceFn& landed, std::vector<std::shared_ptr<void>> readyFor) {
  const auto& all = rendezvous_.exchange(position_, mine, timeout_, algorithm, std::move(readyFor));
  std::vector<at::Tensor> pieces(size()), read;
  try {
    for (int p = 0; p < size(); ++p) {
      if (!wanted(p)) continue;
      const Contribution& c = all[p];
      const at::Tensor source = take(p, c.tensor);
      if (!source.is_cuda()) {
        // CPU workers share memory: read in place (the reference keeps the producer from
        // writing into the buffer until this reader is done with it)
        pieces[p] = source;
        continue;
      }
      at::Tensor target = into(p, source);
      pieces[p] = target;
      if (source.numel() == 0) continue;
      // after its producer (of our chunk, where it marked that apart), on our stream
      external::cuda::waitFor(c.readyFor.empty() ? c.ready : c.readyFor[position_], c.tensor);
      if (!external::cuda::copyBetweenDevices(target, source)) {
        common::fail(common::code::kInternal, "a peer piece has a layout the copy engines cannot read");
      }
      read.push_back(c.tensor);
      if (landed) landed(p, target);
    }
  } catch (...) {
    external::cuda::keepUntilDone(std::move(read));
    rendezvous_.depart();
    throw;
  }
  external::cuda::keepUntilDone(std::move(read));
  rendezvous_.depart();
  return pieces;
}

// CPU workers read their peers' pieces in place and concatenate them; GPUs copy each piece
// straight into its region of the output.
at::Tensor PullCall::allGather(const at::Tensor& local, int64_t dim, int64_t gatheredSize) {
  const int n = size();
  at::Tensor out = local.is_cuda() ? at::empty(withSize(local.sizes(), dim, gatheredSize), local.options()) : at::Tensor();
  const std::vector<at::Tensor> pieces = pull(kPullAllGather, local.contiguous(), everyone, whole, [&](int p, const at::Tensor&) {
    return out.narrow(dim, chunkOffset(gatheredSize, n, p), chunkSize(gatheredSize, n, p));
  });
  return local.is_cuda() ? out : at::cat(pieces, dim);
}

// The arriving pieces carry their own sizes along concatDim; concatSize places them on GPUs.
at::Tensor PullCall::allToAll(const at::Tensor& local, int64_t splitDim, int64_t concatDim, int64_t concatSize) {
  const int n = size();
  const int64_t split = local.size(splitDim);
  const int64_t offset = chunkOffset(split, n, position_), mineAlongSplit = chunkSize(split, n, position_);
  at::Tensor out;
  if (local.is_cuda()) out = at::empty(withSize(withSize(local.sizes(), splitDim, mineAlongSplit), concatDim, concatSize), local.options());
  const std::vector<at::Tensor> pieces = pull(
      kPullAllToAll, local.contiguous(), everyone, [&](int, const at::Tensor& theirs) { return theirs.narrow(splitDim, offset, mineAlongSplit); },
      [&](int p, const at::Tensor&) { return out.narrow(concatDim, chunkOffset(concatSize, n, p), chunkSize(concatSize, n, p)); });
  return local.is_cuda() ? out : at::cat(pieces, concatDim);
}

at::Tensor PullCall::allReduce(const at::Tensor& local, ReduceOp op) {
  if (reducing_) return reducing_->allReduce(local, op);
  const at::Tensor mine = local.contiguous();
  std::vector<at::Tensor> parts = pull(
      kPullAllReduce, mine, [&](int p) { return p != position_; }, whole,
      [&](int, const at::Tensor&) { return at::empty_like(mine); });
  parts[position_] = mine;
  return reduceInOrder(parts, op);
}

at::Tensor PullCall::reduceScatter(const at::Tensor& local, ReduceOp op, int64_t dim) {
  if (reducing_) return reducing_->reduceScatter(local, op, dim);
  const int n = size();
  const at::Tensor mine = local.contiguous();
  const int64_t full = mine.size(dim), offset = chunkOffset(full, n, position_), rows = chunkSize(full, n, position_);
  std::vector<at::Tensor> parts = pull(
      kPullReduceScatter, mine, [&](int p) { return p != position_; },
      [&](int, const at::Tensor& theirs) { return theirs.narrow(dim, offset, rows); },
      [&](int, const at::Tensor& source) { return at::empty(source.sizes(), mine.options()); });
  parts[position_] = mine.narrow(dim, offset, rows);
  return reduceInOrder(parts, op);
}

at::Tensor PullCall::shift(const at::Tensor& local, int64_t incomingNumel) {
  if (reducing_) return reducing_->shift(local, incomingNumel);
  const int previous = (position_ - 1 + size()) % size();
  const std::vector<at::Tensor> got = pull(
      kPullShift, local.contiguous().flatten(), [&](int p) { return p == previous; }, whole,
      [&](int, const at::Tensor&) { return at::empty({incomingNumel}, local.options()); });
  if (got[previous].numel() != incomingNumel) common::fail(common::code::kInternal, "a ring pass received an unexpected size");
  return got[previous];
}

// Own piece first, on the caller's stream; the peers' pieces are pulled on the communication
// stream meanwhile, each used once its copy has landed.
void PullCall::allGatherEach(const at::Tensor& local, int64_t dim, int64_t gatheredSize, const PieceFn& use) {
  const int n = size();
  const at::Tensor mine = local.contiguous();
  std::vector<at::Tensor> pieces;
  std::vector<std::shared_ptr<void>> arrived(n);
  {
    external::cuda::CommunicationScope onCommunicationStream(mine);  // inactive on CPU workers
    pieces = pull(
        kPullAllGatherEach, mine, [&](int p) { return p != position_; }, whole,
        [&](int, const at::Tensor& source) { return at::empty(source.sizes(), mine.options()); },
        [&](int p, const at::Tensor& copy) { arrived[p] = external::cuda::markReady(copy); });
  }
  use(position_, mine);
  for (int i = 1; i < n; ++i) {
    const int p = (position_ + i) % n;
    if (pieces[p].size(dim) != chunkSize(gatheredSize, n, p)) common::fail(common::code::kInternal, "a gathered piece has an unexpected size");
    external::cuda::waitFor(arrived[p], pieces[p]);
    use(p, pieces[p]);
  }
}

// The peers' chunks first, each marked as it is made, so that each peer pulls its chunk as soon as
// it exists; meanwhile this participant pulls its own rows from the peers (on the communication
// stream, behind none of its own compute: it reads only the peers' chunks) and fills its own
// chunk on the caller's stream, then adds what it pulled, in group order.
at::Tensor PullCall::reduceScatterFilled(at::IntArrayRef shape, const at::TensorOptions& options, int64_t dim, const PieceFn& fill) {
  const int n = size();
  const int64_t full = shape[dim];
  const at::Tensor partial = at::empty(shape, options);
  auto chunkOf = [&](int p) { return partial.narrow(dim, chunkOffset(full, n, p), chunkSize(full, n, p)); };
  std::vector<std::shared_ptr<void>> readyFor(partial.is_cuda() ? n : 0);
  try {
    for (int i = 1; i < n; ++i) {
      const int p = (position_ + i) % n;
      fill(p, chunkOf(p));
      if (partial.is_cuda()) readyFor[p] = external::cuda::markReady(partial);
    }
  } catch (const std::exception& e) {
    rendezvous_.abandon(std::make_shared<KernelError>(KernelError{"reduce_scatter", e.what(), 0, kernelErrorCode(e)}));  // the peers must not wait
    throw;
  }
  std::vector<at::Tensor> parts;
  std::vector<std::shared_ptr<void>> arrived(n);
  const int64_t offset = chunkOffset(full, n, position_), rows = chunkSize(full, n, position_);
  {
    external::cuda::CommunicationScope onCommunicationStream(partial, external::cuda::kNoComputeWork);
    parts = pull(
        kPullReduceScatterFilled, partial, [&](int p) { return p != position_; },
        [&](int, const at::Tensor& theirs) { return theirs.narrow(dim, offset, rows); },
        [&](int, const at::Tensor& source) { return at::empty(source.sizes(), options); },
        [&](int p, const at::Tensor& copy) { arrived[p] = external::cuda::markReady(copy); }, std::move(readyFor));
  }
  parts[position_] = chunkOf(position_);
  fill(position_, parts[position_]);
  for (int p = 0; p < n; ++p) {
    if (p != position_) external::cuda::waitFor(arrived[p], parts[p]);
  }
  return reduceInOrder(parts, ReduceOp::kSum);
}

}  // namespace dtorch::core
