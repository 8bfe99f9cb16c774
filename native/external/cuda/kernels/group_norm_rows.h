// Group norm over x [N, C, spatial] laid out contiguously (NCHW), optionally followed by SiLU, in
// two passes over the whole GPU: the statistics of each (sample, group) row split over many
// blocks (a VAE decoder at 1024² has 32 rows of 4M values: one block per row, as LibTorch's
// kernel gives, leaves most SMs idle), then one pass that normalises, scales, shifts and applies
// the SiLU as it writes. What the VAE's resnet blocks run before each convolution: the SiLU's
// read and write of the normalised activation, and the float copies of the statistics, go away.
// Plain types only: nvcc compiles it without LibTorch's headers.
#pragma once
#include <cstdint>

#include "external/cuda/kernels/float_type.h"

namespace dtorch::external::cuda::kernels {

// Floats of scratch groupNormRows needs for these sizes (the per-block partial sums).
int64_t groupNormScratchFloats(FloatType type, int64_t n, int64_t channels, int64_t groups, int64_t spatial);

// y = x normalised per (sample, group) with that row's mean and biased variance (float), times
// its channel's weight plus its bias (either may be null; of x's type), computed in float and
// rounded to x's type once, as LibTorch's group_norm; with `silu`, then silu of that rounded
// value, rounded again, as LibTorch's silu of group_norm's output. x and y contiguous and 16-byte
// aligned, spatial a multiple of 16 bytes' worth of values, N * groups at most 65,535 (the caller
// checks). `scratch`: groupNormScratchFloats floats. Returns the CUDA error of the launches.
int groupNormRows(FloatType type, const void* x, const void* weight, const void* bias, void* y, float* scratch, int64_t n, int64_t channels,
                  int64_t groups, int64_t spatial, float eps, bool silu, void* stream);

// The same of x laid out channels last, [N, spatial, C] (a [N, C, H, W] tensor in channels-last
// memory, as cuDNN's convolutions on Hopper read and write it), into y laid out alike: three
// passes (partial sums per block and group, each group's statistics, the normalisation). Served
// where C / (16 bytes' worth of values) divides 256, C <= 2048, and a group's channels are a
// multiple or a divisor of that many; groupNormLastScratchFloats is -1 elsewhere.
int64_t groupNormLastScratchFloats(FloatType type, int64_t n, int64_t channels, int64_t groups, int64_t spatial);
int groupNormLastRows(FloatType type, const void* x, const void* weight, const void* bias, void* y, float* scratch, int64_t n, int64_t channels,
                      int64_t groups, int64_t spatial, float eps, bool silu, void* stream);

}  // namespace dtorch::external::cuda::kernels
