// to(dtype): a dtype conversion; the placement passes through.
#include <ATen/ATen.h>

#include "core/operators/infer_util.h"
#include "core/operators/registry.h"

namespace dtorch::core {
namespace {

void inferTo(const InferContext& ctx, Outputs& out) {
  out.push_back(outputLike(ctx, ctx.inputs[0]->shape, dtypeFromCode(static_cast<int>(ctx.intAttr(0)))));
}

void runTo(KernelContext& ctx) { ctx.outputs.push_back(ctx.input(0).to(ctx.outputMeta().dtype)); }

// Shards pass; partials do not (the cast of a sum is not the sum of the casts).
void castRows(const InferContext& ctx, SignatureRows& rows) {
  for (int32_t i = 0; i < ctx.inputs[0]->ndim(); ++i) rows.push_back(row({Placement::shard(i)}, Placement::shard(i)));
}

}  // namespace

void registerCastOps(OpRegistry& registry) { registry.add({"to", 1, "dtype", inferTo, runTo, castRows}); }

}  // namespace dtorch::core
