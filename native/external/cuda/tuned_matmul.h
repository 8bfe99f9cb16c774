// Linear layers' matmuls through cuBLASLt with the kernel chosen by timing (DTORCH_MATMUL_TUNING=1;
// off by default until GPU runs have shown it). cuBLASLt's heuristic ranks its kernels by a model of the GPU, and LibTorch runs
// its first choice; on the shapes an unfused LoRA adapter widens (Flux's in = 3072 + r) that
// choice ran up to 17% slower than the kernel the base shape gets, for 0.5% more work
// (bench/results/lora-gemms/h100.jsonl). Here the first call of each shape on a GPU model, outside
// a CUDA graph capture, times the heuristic's best candidates on the call's own operands and keeps
// the fastest for the process; later calls on every GPU of that model (and the graphs that capture
// them) run that one, so replicated work gives the same bits on each. Another process (a cluster
// node) chooses on its own: its bits may differ by a rounding. While a stream captures, a shape not
// timed yet runs the heuristic's first choice untimed.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace dtorch::external::cuda {

// What cuBLASLt's epilogue does to x wᵀ: nothing, + bias, or GELU (tanh) of it + bias (as
// at::_addmm_activation's).
enum class MatmulEpilogue { kNone, kBias, kGeluBias };

// epilogue(x wᵀ (+ bias)) for x [M, K] and w [N, K], each with unit column stride and rows at least
// K apart (the first columns of a wider buffer are fine), bias [N] contiguous (given exactly when
// the epilogue takes one); written into `out` ([M, N], unit column stride, rows at least N apart)
// when given, else into a new contiguous [M, N]. nullopt when this path does not serve the operands
// (tuning off, a CPU tensor, not all bfloat16 or all float16, a stride or pointer cuBLASLt cannot
// take, a build without CUDA, a cuBLASLt failure): the caller runs LibTorch's matmul, and `out`
// has not been written.
std::optional<at::Tensor> tunedLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor* bias, MatmulEpilogue epilogue,
                                      const at::Tensor* out = nullptr);

// c + x wᵀ (c [M, N] with unit column stride and rows at least N apart: the first columns of a
// wider buffer are fine) into a new contiguous [M, N], in one cuBLASLt matmul that reads c where it
// lies (beta = 1, C apart from D). LibTorch's out-of-place addmm copies c into its output first (a
// pass over c and the output of its own). The heuristic's first kernel, or with
// DTORCH_MATMUL_TUNING=1 the one timed fastest as tunedLinear's; nullopt where this path does not
// serve the operands (as tunedLinear, the setting aside).
std::optional<at::Tensor> linearOnto(const at::Tensor& c, const at::Tensor& x, const at::Tensor& w);

// Counters of this process (all GPUs): shapes chosen for, candidates timed for them, calls that
// ran a choice kept for their shape, and calls that ran the heuristic's first choice untimed (a
// shape first seen while its stream captured).
struct MatmulTuningStats {
  int64_t shapes = 0;
  int64_t candidates = 0;
  int64_t tunedCalls = 0;
  int64_t heuristicCalls = 0;
};
MatmulTuningStats matmulTuningStats();

}  // namespace dtorch::external::cuda
