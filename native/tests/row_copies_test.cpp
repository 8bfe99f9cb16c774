// planRowCopies against an element-by-element copy: random pairs of views (narrowed, permuted,
// columns, size-1 and empty dims) of random buffers, the planned 2-D copies replayed on the host.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

#include "external/cuda/row_copies.h"
#include "tests/check.h"

using dtorch::external::cuda::planRowCopies;

namespace {

std::mt19937_64 rng(7);
int64_t below(int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); }

// A view of `sizes` inside a contiguous buffer of a larger shape: its strides and offset, and
// the buffer's size. The view's dims are a permutation of the buffer's.
struct View {
  std::vector<int64_t> strides;
  int64_t offset = 0, bufferSize = 1;
};
View viewOf(const std::vector<int64_t>& sizes) {
  const size_t n = sizes.size();
  std::vector<size_t> order(n);  // buffer dim of each view dim
  std::iota(order.begin(), order.end(), 0);
  if (below(3) == 0) std::shuffle(order.begin(), order.end(), rng);
  std::vector<int64_t> bufferSizes(n), starts(n);
  for (size_t d = 0; d < n; ++d) {  // the buffer dim holds the view dim with room around it
    const int64_t extra = below(2) ? 0 : below(3);
    bufferSizes[order[d]] = sizes[d] + extra;
    starts[order[d]] = extra ? below(extra + 1) : 0;
  }
  std::vector<int64_t> bufferStrides(n, 1);
  for (size_t d = n - 1; d-- > 0;) bufferStrides[d] = bufferStrides[d + 1] * std::max<int64_t>(bufferSizes[d + 1], 1);
  View v;
  v.strides.resize(n);
  for (size_t d = 0; d < n; ++d) {
    v.strides[d] = bufferStrides[order[d]];
    v.offset += starts[order[d]] * bufferStrides[order[d]];
  }
  v.bufferSize = bufferStrides[0] * std::max<int64_t>(bufferSizes[0], 1);
  return v;
}

}  // namespace

int main() {
  int planned = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const size_t ndim = 1 + static_cast<size_t>(below(4));
    std::vector<int64_t> sizes(ndim);
    for (auto& s : sizes) s = below(6);  // 0 .. 5: empty and size-1 dims included
    const View src = viewOf(sizes), dst = viewOf(sizes);
    std::vector<int64_t> from(static_cast<size_t>(src.bufferSize)), to(static_cast<size_t>(dst.bufferSize), -1);
    std::iota(from.begin(), from.end(), 1000);
    std::vector<int64_t> expected = to;
    int64_t numel = 1;
    for (int64_t s : sizes) numel *= s;
    std::vector<int64_t> idx(ndim, 0);
    for (int64_t e = 0; e < numel; ++e) {  // element by element, row-major
      int64_t a = src.offset, b = dst.offset;
      for (size_t d = 0; d < ndim; ++d) a += idx[d] * src.strides[d], b += idx[d] * dst.strides[d];
      expected[static_cast<size_t>(b)] = from[static_cast<size_t>(a)];
      for (size_t d = ndim; d-- > 0 && ++idx[d] == sizes[d];) idx[d] = 0;
    }
    const auto copies = planRowCopies(sizes, src.strides, dst.strides);
    CHECK(copies.has_value());  // views of a buffer without overlaps never overlap
    for (const auto& c : *copies) {
      CHECK(c.width >= 1 && c.rows >= 1);
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int64_t w = 0; w < c.width; ++w) {
          to[static_cast<size_t>(dst.offset + c.dstOffset + r * c.dstPitch + w)] = from[static_cast<size_t>(src.offset + c.srcOffset + r * c.srcPitch + w)];
        }
      }
    }
    CHECK(to == expected);  // every element copied, nothing else touched
    planned += !copies->empty();
  }
  // a broadcast (stride 0 over a dim of size > 1) is refused
  CHECK(!planRowCopies({3, 4}, {0, 1}, {4, 1}).has_value());
  // a column of a [3, 5] tensor into a contiguous [3, 1]: one copy of 3 rows of one element
  const auto column = planRowCopies({3, 1}, {5, 1}, {1, 1});
  CHECK(column && column->size() == 1 && (*column)[0].rows == 3 && (*column)[0].width == 1 && (*column)[0].srcPitch == 5 && (*column)[0].dstPitch == 1);
  // contiguous into contiguous: one copy of everything
  const auto whole = planRowCopies({2, 3, 4}, {12, 4, 1}, {12, 4, 1});
  CHECK(whole && whole->size() == 1 && (*whole)[0].rows == 1 && (*whole)[0].width == 24);
  std::printf("row copies: 20000 random pairs of views replayed exactly (%d non-empty)\n", planned);
  return 0;
}
