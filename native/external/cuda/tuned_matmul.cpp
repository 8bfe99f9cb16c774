#include "external/cuda/tuned_matmul.h"

#include <atomic>

#include "common/env.h"
#include "common/word_hash.h"

#ifdef DTORCH_WITH_CUDA
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAStream.h>
#include <cublasLt.h>

#include <array>
#include <mutex>
#include <unordered_map>
#endif

namespace dtorch::external::cuda {

namespace {
std::atomic<int64_t> shapesTimed{0}, candidatesTimed{0}, tunedCalls{0}, heuristicCalls{0};
}  // namespace

MatmulTuningStats matmulTuningStats() { return {shapesTimed.load(), candidatesTimed.load(), tunedCalls.load(), heuristicCalls.load()}; }

#ifdef DTORCH_WITH_CUDA

namespace {

constexpr int kCandidates = 8;  // the heuristic's best few: past them its ranking is rarely wrong by much
constexpr int kTimedRuns = 3;   // per candidate, after one untimed run

// What a kernel choice depends on: the GPU model (not its index: the GPUs of one model in a
// process share a choice, so replicated work computes the same bits on each), the problem, the
// strides, the pointers' alignment (cuBLASLt kernels may assume up to 256 bytes), the workspace
// and the SMs it may use.
struct Key {
  uint64_t model;
  int dtype, epilogue, smCount;
  int64_t m, n, k, ldx, ldw, ldy, ldc;  // ldc: the addend's rows (linearOnto), 0 without one
  uint32_t alignX, alignW, alignY, alignBias, alignC;
  size_t workspace;
  bool timed;  // chosen by timing (DTORCH_MATMUL_TUNING=1), else the heuristic's first
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& key) const {
    common::WordHash h;
    for (int64_t v : {key.m, key.n, key.k, key.ldx, key.ldw, key.ldy, key.ldc}) h.add(static_cast<uint64_t>(v));
    h.add(key.model);
    for (int v : {key.dtype, key.epilogue, key.smCount}) h.add(static_cast<uint64_t>(v));
    for (uint32_t v : {key.alignX, key.alignW, key.alignY, key.alignBias, key.alignC}) h.add(v);
    h.add(key.workspace);
    h.add(key.timed ? 1 : 0);
    return h.value();
  }
};

std::mutex choicesMutex;
std::unordered_map<Key, cublasLtMatmulAlgo_t, KeyHash> choices;  // the timed fastest, per shape

// The current GPU's model: its name, compute capability and SM count, hashed.
uint64_t modelOf(const cudaDeviceProp& props) {
  common::WordHash h;
  for (const char* c = props.name; *c != 0; ++c) h.add(static_cast<unsigned char>(*c));
  for (int v : {props.major, props.minor, props.multiProcessorCount}) h.add(static_cast<uint64_t>(v));
  return h.value();
}

// The largest power of two up to 256 that divides the address (as LibTorch tells cuBLASLt).
uint32_t alignmentOf(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// cuBLASLt's descriptors, destroyed with the call.
struct MatmulDesc {
  cublasLtMatmulDesc_t desc = nullptr;
  ~MatmulDesc() {
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};
struct Layout {
  cublasLtMatrixLayout_t layout = nullptr;
  ~Layout() {
    if (layout) cublasLtMatrixLayoutDestroy(layout);
  }
};
struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  ~Preference() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
  }
};
struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Events() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

bool ok(cublasStatus_t status) { return status == CUBLAS_STATUS_SUCCESS; }

// A row-major [rows, cols] matrix with rows `ld` apart, as cuBLASLt's column-major [cols, rows].
bool layoutOf(Layout& out, cudaDataType type, int64_t rows, int64_t cols, int64_t ld) {
  return ok(cublasLtMatrixLayoutCreate(&out.layout, type, static_cast<uint64_t>(cols), static_cast<uint64_t>(rows), ld));
}

// The distance between rows of a 2-d tensor with unit column stride (its width when it has one row),
// or -1 when cuBLASLt cannot take it (rows closer than the width, or not 16 bytes apart).
int64_t rowStride(const at::Tensor& t) {
  if (t.dim() != 2 || t.stride(1) != 1) return -1;
  const int64_t ld = t.size(0) > 1 ? t.stride(0) : t.size(1);
  return ld >= t.size(1) && (ld * static_cast<int64_t>(t.element_size())) % 16 == 0 ? ld : -1;
}

struct Problem {
  cublasLtHandle_t handle;
  cudaStream_t stream;
  const MatmulDesc& op;
  const Layout &a, &b, &c, &d;  // c: the addend's layout (d's without one)
  const void *w, *x, *addend;   // addend: C of D = A B + C (nullptr: D = A B)
  void* y;
  void* workspace;
  size_t workspaceBytes;

  bool run(const cublasLtMatmulAlgo_t& algo) const {
    const float one = 1.f, zero = 0.f;
    return ok(cublasLtMatmul(handle, op.desc, &one, w, a.layout, x, b.layout, addend ? &one : &zero, addend ? addend : y, c.layout, y, d.layout, &algo,
                             workspace, workspaceBytes, stream));
  }
};

// The fastest of the heuristic's candidates on these operands (each run once, then timed), or
// nullopt when none ran. The output holds the last candidate's result: the caller runs the choice.
std::optional<cublasLtMatmulAlgo_t> fastest(const Problem& p, const cublasLtMatmulHeuristicResult_t* results, int count) {
  Events events;
  if (cudaEventCreate(&events.start) != cudaSuccess || cudaEventCreate(&events.stop) != cudaSuccess) return std::nullopt;
  std::optional<cublasLtMatmulAlgo_t> best;
  float bestMs = 0.f;
  for (int i = 0; i < count; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS || results[i].workspaceSize > p.workspaceBytes || !p.run(results[i].algo)) continue;
    bool ran = cudaEventRecord(events.start, p.stream) == cudaSuccess;
    for (int r = 0; ran && r < kTimedRuns; ++r) ran = p.run(results[i].algo);
    float ms = 0.f;
    if (!ran || cudaEventRecord(events.stop, p.stream) != cudaSuccess || cudaEventSynchronize(events.stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, events.start, events.stop) != cudaSuccess) {
      continue;
    }
    candidatesTimed.fetch_add(1);
    if (!best || ms < bestMs) best = results[i].algo, bestMs = ms;
  }
  return best;
}

// epilogue(x wᵀ (+ bias)) (+ addend) into `out` or a new [M, N] (see tunedLinear and linearOnto),
// through the kernel timed fastest (`timed`) or the heuristic's first; nullopt where this path
// does not serve the operands.
std::optional<at::Tensor> cublasLtLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor* bias, MatmulEpilogue epilogue, const at::Tensor* out,
                                         const at::Tensor* addend, bool timed) {
  if (!x.is_cuda() || x.dim() != 2 || w.dim() != 2) return std::nullopt;
  const at::ScalarType dtype = x.scalar_type();
  if ((dtype != at::kBFloat16 && dtype != at::kHalf) || w.scalar_type() != dtype || w.device() != x.device()) return std::nullopt;
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  if (m == 0 || n == 0 || k == 0 || w.size(1) != k || (bias != nullptr) != (epilogue != MatmulEpilogue::kNone)) return std::nullopt;
  if (bias && (bias->scalar_type() != dtype || bias->device() != x.device() || bias->dim() != 1 || bias->size(0) != n || !bias->is_contiguous() ||
               alignmentOf(bias->data_ptr()) < 16)) {
    return std::nullopt;
  }
  if (out && (out->scalar_type() != dtype || out->device() != x.device() || out->dim() != 2 || out->size(0) != m || out->size(1) != n)) return std::nullopt;
  if (addend && (addend->scalar_type() != dtype || addend->device() != x.device() || addend->dim() != 2 || addend->size(0) != m || addend->size(1) != n))
    return std::nullopt;
  const int64_t ldx = rowStride(x), ldw = rowStride(w), ldc = addend ? rowStride(*addend) : 0;
  if (ldx < 0 || ldw < 0 || ldc < 0) return std::nullopt;
  at::Tensor y = out ? *out : at::empty({m, n}, x.options().memory_format(at::MemoryFormat::Contiguous));
  const int64_t ldy = rowStride(y);
  if (ldy < 0) return std::nullopt;

  const cudaDataType type = dtype == at::kBFloat16 ? CUDA_R_16BF : CUDA_R_16F;
  MatmulDesc op;
  if (!ok(cublasLtMatmulDescCreate(&op.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F))) return std::nullopt;
  // y = x wᵀ row-major is yᵀ = w xᵀ column-major: A = w (transposed), B = x, D = y
  const cublasOperation_t transA = CUBLAS_OP_T, transB = CUBLAS_OP_N;
  bool described = ok(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transA, sizeof(transA))) &&
                   ok(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transB, sizeof(transB)));
  if (bias) {
    const cublasLtEpilogue_t epi = epilogue == MatmulEpilogue::kGeluBias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    const void* biasPtr = bias->data_ptr();
    described = described && ok(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi))) &&
                ok(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &biasPtr, sizeof(biasPtr)));
  }
  // the SMs LibTorch's matmuls leave free (dt.cuda.setSMCarveout), these leave free too
  const cudaDeviceProp& props = *at::cuda::getCurrentDeviceProperties();
  int smCount = 0;
  if (const std::optional<int32_t> carveout = at::globalContext()._SMCarveout_EXPERIMENTAL(); carveout && *carveout > 0) {
    smCount = std::max(1, props.multiProcessorCount - *carveout);
    described = described && ok(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &smCount, sizeof(smCount)));
  }
  Layout a, b, c, d;
  if (!described || !layoutOf(a, type, n, k, ldw) || !layoutOf(b, type, m, k, ldx) || !layoutOf(d, type, m, n, ldy) ||
      !layoutOf(c, type, m, n, addend ? ldc : ldy)) {
    return std::nullopt;
  }

  const Key key{modelOf(props), static_cast<int>(dtype), static_cast<int>(epilogue), smCount, m, n, k, ldx, ldw, ldy, ldc,
                alignmentOf(x.data_ptr()), alignmentOf(w.data_ptr()), alignmentOf(y.data_ptr()), bias ? alignmentOf(bias->data_ptr()) : 0u,
                addend ? alignmentOf(addend->data_ptr()) : 0u, at::cuda::getCUDABlasLtWorkspaceSize(), timed};
  const Problem problem{at::cuda::getCurrentCUDABlasLtHandle(), at::cuda::getCurrentCUDAStream().stream(), op, a, b, c, d, w.data_ptr(), x.data_ptr(),
                        addend ? addend->data_ptr() : nullptr, y.data_ptr(), at::cuda::getCUDABlasLtWorkspace(), key.workspace};
  const uint32_t alignC = addend ? key.alignC : key.alignY;
  std::optional<cublasLtMatmulAlgo_t> kept;
  {
    std::lock_guard<std::mutex> lock(choicesMutex);
    if (auto it = choices.find(key); it != choices.end()) kept = it->second;
  }
  if (kept) {
    if (!problem.run(*kept)) return std::nullopt;
    if (timed) tunedCalls.fetch_add(1);
    return y;
  }

  Preference pref;
  const uint64_t workspaceBytes = key.workspace;
  if (!ok(cublasLtMatmulPreferenceCreate(&pref.pref)) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes, sizeof(workspaceBytes))) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key.alignW, sizeof(key.alignW))) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key.alignX, sizeof(key.alignX))) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC, sizeof(alignC))) ||
      !ok(cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key.alignY, sizeof(key.alignY)))) {
    return std::nullopt;
  }
  std::array<cublasLtMatmulHeuristicResult_t, kCandidates> results{};
  int count = 0;
  if (!ok(cublasLtMatmulAlgoGetHeuristic(problem.handle, op.desc, a.layout, b.layout, c.layout, d.layout, pref.pref, timed ? kCandidates : 1,
                                         results.data(), &count)) ||
      count == 0) {
    return std::nullopt;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(problem.stream, &capture) != cudaSuccess) return std::nullopt;
  if (timed && capture != cudaStreamCaptureStatusNone) {
    // nothing can be timed while the stream captures: the first choice, and the next call outside a capture times them
    if (!problem.run(results[0].algo)) return std::nullopt;
    heuristicCalls.fetch_add(1);
    return y;
  }
  std::optional<cublasLtMatmulAlgo_t> choice = timed && count > 1 ? fastest(problem, results.data(), count) : results[0].algo;
  if (!choice) return std::nullopt;
  bool first = false;
  {
    // a GPU of the same model that chose meanwhile (its worker timed the shape too) keeps its choice
    std::lock_guard<std::mutex> lock(choicesMutex);
    const auto [it, inserted] = choices.emplace(key, *choice);
    choice = it->second, first = inserted;
  }
  if (!problem.run(*choice)) return std::nullopt;
  if (timed && first) shapesTimed.fetch_add(1);
  if (timed) tunedCalls.fetch_add(1);
  return y;
}

}  // namespace

std::optional<at::Tensor> tunedLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor* bias, MatmulEpilogue epilogue, const at::Tensor* out) {
  if (!common::settings().matmulTuning) return std::nullopt;
  return cublasLtLinear(x, w, bias, epilogue, out, nullptr, /*timed=*/true);
}

std::optional<at::Tensor> linearOnto(const at::Tensor& c, const at::Tensor& x, const at::Tensor& w) {
  return cublasLtLinear(x, w, nullptr, MatmulEpilogue::kNone, nullptr, &c, common::settings().matmulTuning);
}

#else

std::optional<at::Tensor> tunedLinear(const at::Tensor&, const at::Tensor&, const at::Tensor*, MatmulEpilogue, const at::Tensor*) { return std::nullopt; }
std::optional<at::Tensor> linearOnto(const at::Tensor&, const at::Tensor&, const at::Tensor&) { return std::nullopt; }

#endif

}  // namespace dtorch::external::cuda
