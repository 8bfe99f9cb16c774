// An unfused LoRA adapter's widened input [x | A x] (@dtorch/nn loraWideProduct: one matmul of
// it with [W | B] gives W x + B A x), as one op instead of a linear and a cat:
//
// ---- lora_join(x, a): cat([x, linear(x, a)], -1), formed by fusing a bias-free linear into the
// cat that puts its input before it. The down projection writes straight into the joined
// buffer's last columns, so A x never goes through memory on its own.
//
// ---- layer_norm_modulate_join(c, x, s, weight?, bias?, a): lora_join of layer_norm_modulate's
// output (adaLN's modulated norm, which feeds the widening linears of Flux's and SD3's blocks),
// formed by fusing the norm into the lora_join that reads it. On GPUs the norm's row kernel
// writes its rows into the joined buffer's first columns and A reads them there: the join copies
// nothing (a [tokens, in] read and write fewer per adapted linear).
//
// Elsewhere (or where the row kernel cannot write there) the norm runs as it does unfused and is
// copied in; either way the bits equal the unfused ops on CPUs.
#include <ATen/ATen.h>

#include "core/operators/infer_util.h"
#include "core/operators/registry.h"

namespace dtorch::core {
namespace {

// [..., in + r] for x [..., in] and a [r, in], of the output's dtype.
at::Tensor joinedBuffer(const KernelContext& ctx, const at::Tensor& x, const at::Tensor& a) {
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes.back() += a.size(0);
  return at::empty(sizes, x.options().dtype(ctx.outputMeta().dtype).memory_format(at::MemoryFormat::Contiguous));
}

// The first `in` columns of `joined` (a view: rows in + r apart).
at::Tensor headOf(const at::Tensor& joined, int64_t in) { return joined.narrow(-1, 0, in); }

// joined's last r columns = x · aᵀ, for x [..., in] (the joined buffer's head, or the same
// values where they lie contiguous). GPUs, rows 16-byte aligned: the matmul writes in place
// (cuBLAS's leading dimension; the unfused linear's bits, seen on an H200). Elsewhere into a
// buffer of its own, then copied in: a CPU gemm (ranks 2 and 9) and cuBLAS at an odd leading
// dimension sum in another order, and the bits are to equal the unfused linear's.
void downInto(const at::Tensor& joined, const at::Tensor& x, const at::Tensor& a) {
  const int64_t width = joined.size(-1), in = x.size(-1);
  at::Tensor tail = joined.view({-1, width}).narrow(1, in, a.size(0));
  const at::Tensor rows = x.reshape({-1, in});  // a view where the rows lie evenly (the head)
  const bool aligned = (width * static_cast<int64_t>(joined.element_size())) % 16 == 0;
  if (joined.is_cuda() && aligned) at::mm_out(tail, rows, a.t());
  else tail.copy_(at::mm(rows, a.t()));
}

// Whether the joined buffer can be filled in place: one floating dtype throughout (else the
// unfused ops' promotions apply: cat after linear).
bool joinsInPlace(const KernelContext& ctx, const at::Tensor& x, const at::Tensor& a) {
  return x.dim() >= 2 && x.numel() > 0 && a.size(0) > 0 && x.scalar_type() == a.scalar_type() && ctx.outputMeta().dtype == x.scalar_type() &&
         at::isFloatingType(x.scalar_type());
}

// The unfused ops: linear, then cat.
at::Tensor joinUnfused(const KernelContext& ctx, const at::Tensor& x, const at::Tensor& a) {
  return at::cat({x, at::linear(x, a)}, -1).to(ctx.outputMeta().dtype);
}

void runLoraJoin(KernelContext& ctx) {
  const at::Tensor &x = ctx.input(0), &a = ctx.input(1);
  if (!joinsInPlace(ctx, x, a)) {
    ctx.outputs.push_back(joinUnfused(ctx, x, a));
    return;
  }
  at::Tensor joined = joinedBuffer(ctx, x, a);
  at::Tensor head = headOf(joined, x.size(-1));
  head.copy_(x);
  downInto(joined, x, a);
  ctx.outputs.push_back(joined);
}

void runLayerNormModulateJoin(KernelContext& ctx) {
  const at::Tensor &x = ctx.input(1), &a = ctx.input(ctx.inputs.size() - 1);
  if (!joinsInPlace(ctx, x, a) || a.scalar_type() != ctx.input(0).scalar_type()) {
    ctx.outputs.push_back(joinUnfused(ctx, modulatedLayerNorm(ctx, 1), a));
    return;
  }
  at::Tensor joined = joinedBuffer(ctx, x, a);
  at::Tensor head = headOf(joined, x.size(-1));
  const at::Tensor normed = modulatedLayerNorm(ctx, 1, &head);
  if (!normed.is_same(head)) head.copy_(normed);  // the row kernel did not write there: copied
  downInto(joined, normed, a);
  ctx.outputs.push_back(joined);
}

}  // namespace

void registerLoraJoinOps(OpRegistry& registry) {
  registry.add({"lora_join", 2, "(formed by fusion)", inferFormedByFusion, runLoraJoin});
  registry.add({"layer_norm_modulate_join", -1, "(formed by fusion) nNorm, shape..., hasWeight, hasBias, eps", inferFormedByFusion,
                runLayerNormModulateJoin});
}

}  // namespace dtorch::core
