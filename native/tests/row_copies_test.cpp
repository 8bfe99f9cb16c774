// planRowCopies against an element-by-element copy: random views (narrowed, permuted, columns,
// size-1 and empty dims) of random buffers, the planned 2-D copies replayed on the host.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

#include "external/cuda/row_copies.h"

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                       \
    }                                                                 \
  } while (0)

using dtorch::external::cuda::planRowCopies;

int main() {
  std::mt19937_64 rng(7);
  auto below = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
  int planned = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    // a contiguous base tensor
    const int ndim = 1 + static_cast<int>(below(4));
    std::vector<int64_t> base(ndim);
    for (auto& s : base) s = 1 + below(5);
    std::vector<int64_t> baseStrides(ndim, 1);
    for (int d = ndim - 2; d >= 0; --d) baseStrides[d] = baseStrides[d + 1] * base[d + 1];
    // a view: narrow some dims (sometimes to 0 or 1), then permute
    std::vector<int64_t> sizes = base, strides = baseStrides;
    int64_t offset = 0;
    for (int d = 0; d < ndim; ++d) {
      if (below(2)) continue;
      const int64_t start = below(base[d]);
      sizes[d] = below(base[d] - start + 1);
      offset += start * strides[d];
    }
    std::vector<int> order(ndim);
    std::iota(order.begin(), order.end(), 0);
    if (below(3) == 0) std::shuffle(order.begin(), order.end(), rng);
    std::vector<int64_t> s2(ndim), st2(ndim);
    for (int d = 0; d < ndim; ++d) s2[d] = sizes[order[d]], st2[d] = strides[order[d]];
    // the expected copy: the view's elements in row-major order
    std::vector<int64_t> source(static_cast<size_t>(baseStrides[0] * base[0]));
    std::iota(source.begin(), source.end(), 1000);
    std::vector<int64_t> expected;
    int64_t numel = 1;
    for (int64_t s : s2) numel *= s;
    std::vector<int64_t> idx(ndim, 0);
    for (int64_t e = 0; e < numel; ++e) {
      int64_t at = offset;
      for (int d = 0; d < ndim; ++d) at += idx[d] * st2[d];
      expected.push_back(source[static_cast<size_t>(at)]);
      for (int d = ndim - 1; d >= 0 && ++idx[d] == s2[d]; --d) idx[d] = 0;
    }
    const auto copies = planRowCopies(s2, st2);
    CHECK(copies.has_value());  // views of a contiguous tensor never overlap
    std::vector<int64_t> got;
    for (const auto& c : *copies) {
      CHECK(c.width >= 1 && c.rows >= 1 && (c.rows == 1 || c.srcPitch >= 1));
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int64_t w = 0; w < c.width; ++w) got.push_back(source[static_cast<size_t>(offset + c.srcOffset + r * c.srcPitch + w)]);
      }
    }
    CHECK(got == expected);
    planned += !copies->empty();
  }
  // a broadcast (stride 0 over a dim of size > 1) is refused
  CHECK(!planRowCopies({3, 4}, {0, 1}).has_value());
  // a column of a [3, 5] tensor: 3 rows of one element, 5 apart, in one copy
  const auto column = planRowCopies({3, 1}, {5, 1});
  CHECK(column && column->size() == 1 && (*column)[0].rows == 3 && (*column)[0].width == 1 && (*column)[0].srcPitch == 5);
  std::printf("row copies: 20000 random views replayed exactly (%d non-empty)\n", planned);
  return 0;
}
