// An unfused LoRA adapter's widened input [x | A x] (@dtorch/nn loraWideProduct: one matmul of
// it with [W | B] gives W x + B A x), as one op instead of a linear and a cat:
//
// ---- lora_join(x, a): cat([x, linear(x, a)], -1), formed by fusing a bias-free linear into the
// cat that puts its input before it: the same kernels as those ops (a matmul, then one batched
// copy of both parts; a copy of x into the buffer's strided columns by itself ran 2.5 times
// slower on an H200: bench/results/hf-lora/h200-join-variants-3a5fcbb.jsonl's kernel trace), and
// the step that lets the norm before it join:
//
// ---- layer_norm_modulate_join(c, x, s, weight?, bias?, a): lora_join of layer_norm_modulate's
// output (adaLN's modulated norm, which feeds the widening linears of Flux's and SD3's blocks),
// formed by fusing the norm into the lora_join that reads it (x read by nothing else). On GPUs
// the norm's row kernel writes its rows into the joined buffer's first columns and A reads them
// there: the join copies nothing (a [tokens, in] read and write fewer per adapted linear).
//
// Elsewhere (or where the row kernel cannot write there) the norm runs as it does unfused and is
// joined as lora_join joins; either way the bits equal the unfused ops on CPUs.
#include <ATen/ATen.h>

#include "core/operators/infer_util.h"
#include "core/operators/registry.h"
#include "external/cuda/tuned_matmul.h"

namespace dtorch::core {
namespace {

// [..., in + r] for x [..., in] and a [r, in], of the output's dtype.
at::Tensor joinedBuffer(const KernelContext& ctx, const at::Tensor& x, const at::Tensor& a) {
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes.back() += a.size(0);
  return at::empty(sizes, x.options().dtype(ctx.outputMeta().dtype).memory_format(at::MemoryFormat::Contiguous));
}

// rows · aᵀ into `out` ([rows, r]): on GPUs the cuBLASLt kernel timed fastest for the shape, as
// the unfused bias-free linear runs it there (tuned_matmul.h); else at::mm.
void downInto(at::Tensor& out, const at::Tensor& rows, const at::Tensor& a) {
  if (!external::cuda::tunedLinear(rows, a, nullptr, external::cuda::MatmulEpilogue::kNone, &out)) at::mm_out(out, rows, a.t());
}

// x · aᵀ for x [..., in]: [..., r], as the unfused bias-free linear computes it.
at::Tensor downOf(const at::Tensor& x, const at::Tensor& a) {
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes.back() = a.size(0);
  const at::Tensor rows = x.reshape({-1, x.size(-1)});
  at::Tensor out = at::empty({rows.size(0), a.size(0)}, rows.options().memory_format(at::MemoryFormat::Contiguous));
  downInto(out, rows, a);
  return out.view(sizes);
}

// Whether the joined buffer can be filled in place: one floating dtype throughout (else the
// unfused ops' promotions apply: cat after linear).
bool joinsInPlace(const KernelContext& ctx, const at::Tensor& x, const at::Tensor& a) {
  return x.dim() >= 2 && x.numel() > 0 && a.size(0) > 0 && x.scalar_type() == a.scalar_type() && ctx.outputMeta().dtype == x.scalar_type() &&
         at::isFloatingType(x.scalar_type());
}

// [x | x aᵀ]: the unfused ops (linear, then cat), or the same kernels into a buffer of the
// output's dtype.
at::Tensor joined(const KernelContext& ctx, const at::Tensor& x, const at::Tensor& a) {
  if (!joinsInPlace(ctx, x, a)) return at::cat({x, at::linear(x, a)}, -1).to(ctx.outputMeta().dtype);
  at::Tensor out = joinedBuffer(ctx, x, a);
  at::cat_out(out, {x, downOf(x, a)}, -1);
  return out;
}

void runLoraJoin(KernelContext& ctx) { ctx.outputs.push_back(joined(ctx, ctx.input(0), ctx.input(1))); }

void runLayerNormModulateJoin(KernelContext& ctx) {
  const at::Tensor &x = ctx.input(1), &a = ctx.input(ctx.inputs.size() - 1);
  if (x.is_cuda() && joinsInPlace(ctx, x, a) && a.scalar_type() == ctx.input(0).scalar_type()) {
    at::Tensor out = joinedBuffer(ctx, x, a);
    const int64_t width = out.size(-1), in = x.size(-1);
    at::Tensor head = out.narrow(-1, 0, in);
    const at::Tensor normed = modulatedLayerNorm(ctx, 1, &head);
    if (normed.is_same(head)) {
      // the norm's rows are in the buffer (its rows 16-byte aligned, or the kernel would not
      // write there): A x from them, in place (cuBLAS's leading dimension; the unfused linear's
      // bits, seen on an H200)
      at::Tensor tail = out.view({-1, width}).narrow(1, in, a.size(0));
      downInto(tail, out.view({-1, width}).narrow(1, 0, in), a);
      ctx.outputs.push_back(out);
      return;
    }
    ctx.outputs.push_back(joined(ctx, normed, a));  // an odd width: the norm's rows were not aligned
    return;
  }
  ctx.outputs.push_back(joined(ctx, modulatedLayerNorm(ctx, 1), a));
}

}  // namespace

void registerLoraJoinOps(OpRegistry& registry) {
  registry.add({"lora_join", 2, "(formed by fusion)", inferFormedByFusion, runLoraJoin});
  registry.add({"layer_norm_modulate_join", -1, "(formed by fusion) nNorm, shape..., hasWeight, hasBias, eps", inferFormedByFusion,
                runLayerNormModulateJoin});
}

}  // namespace dtorch::core
