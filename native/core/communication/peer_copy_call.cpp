#include "core/communication/peer_copy_call.h"

#include <ATen/ATen.h>

#include "common/error.h"
#include "core/operand/layout.h"
#include "external/cuda/device_sync.h"

namespace dtorch::core {

namespace {
// What each participant is about to do, checked at the meeting (Rendezvous algorithms).
enum Pull : int { kPullAllGather = 101, kPullAllToAll };
}  // namespace

template <typename Take, typename Into>
void PeerCopyCall::pull(int algorithm, const at::Tensor& mine, Take&& take, Into&& into) {
  const auto& all = rendezvous_.exchange(position_, mine, timeout_, algorithm);
  std::vector<at::Tensor> read;
  try {
    for (int p = 0; p < size(); ++p) {
      const Contribution& c = all[p];
      const at::Tensor source = take(p, c.tensor);
      if (source.numel() == 0) continue;
      at::Tensor target = into(p);
      external::cuda::waitFor(c.ready, c.tensor);  // after its producer, on our stream
      if (!external::cuda::copyBetweenDevices(target, source)) {
        common::fail(common::code::kInternal, "a peer piece has a layout the copy engines cannot read");
      }
      read.push_back(c.tensor);
    }
  } catch (...) {
    external::cuda::keepUntilDone(std::move(read));
    rendezvous_.depart();
    throw;
  }
  external::cuda::keepUntilDone(std::move(read));
  rendezvous_.depart();
}

at::Tensor PeerCopyCall::allGather(const at::Tensor& local, int64_t dim, int64_t gatheredSize) {
  const int n = size();
  const at::Tensor mine = local.movedim(dim, 0).contiguous();
  at::Tensor out = at::empty(withSize(mine.sizes(), 0, gatheredSize), mine.options());
  pull(
      kPullAllGather, mine, [](int, const at::Tensor& theirs) { return theirs; },
      [&](int p) { return out.narrow(0, chunkOffset(gatheredSize, n, p), chunkSize(gatheredSize, n, p)); });
  return dim == 0 ? out : out.movedim(0, dim).contiguous();
}

at::Tensor PeerCopyCall::allToAll(const at::Tensor& local, int64_t splitDim, int64_t concatDim, int64_t concatSize) {
  const int n = size();
  const int64_t split = local.size(splitDim);
  const int64_t mineAlongSplit = chunkSize(split, n, position_);
  // Decided from the largest piece's layout, which every participant computes alike (their own
  // pieces differ along concatDim, and a size-1 dim could make one copyable and not another).
  const at::Tensor largest = at::empty(withSize(local.sizes(), concatDim, chunkSize(concatSize, n, 0)), at::TensorOptions().device(at::kMeta));
  if (!external::cuda::copyableByRows(largest.narrow(splitDim, 0, chunkSize(split, n, 0)))) {
    return reducing_->allToAll(local, splitDim, concatDim, concatSize);
  }
  std::vector<at::Tensor> pieces(n);
  for (int p = 0; p < n; ++p) {
    std::vector<int64_t> shape = withSize(local.sizes(), splitDim, mineAlongSplit);
    shape[static_cast<size_t>(concatDim)] = chunkSize(concatSize, n, p);
    pieces[p] = at::empty(shape, local.options());
  }
  pull(
      kPullAllToAll, local.contiguous(),
      [&](int, const at::Tensor& theirs) { return theirs.narrow(splitDim, chunkOffset(split, n, position_), mineAlongSplit); },
      [&](int p) { return pieces[p]; });
  return at::cat(pieces, concatDim);
}

}  // namespace dtorch::core
