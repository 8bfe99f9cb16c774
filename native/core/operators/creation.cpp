// Creation ops: tensors made on a mesh from a shape, a value, a seed or JS data.
// Attribute layout shared by all of them: meshId, nPlacements, placements..., dtype, then
// (except arange) ndim, shape..., then the op's own attributes.
// Random ops are mesh-independent: every rank draws the full tensor from a generator seeded
// with the seed fixed at record time, then keeps its part, so a seed gives the same full
// tensor on one device and on any mesh.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "common/error.h"
#include "core/operand/mesh_table.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"

namespace dtorch::core {
namespace {

using common::code::kInvalidArgument;

// Reads meshId, placements and dtype; leaves `cursor` after the dtype.
TensorMeta creationHeader(const InferContext& ctx, size_t& cursor) {
  TensorMeta meta;
  meta.meshId = static_cast<int>(ctx.intAttr(0));
  const DeviceMesh& mesh = ctx.meshes.get(meta.meshId);
  const int64_t nPlacements = ctx.intAttr(1);
  if (nPlacements != mesh.ndim()) {
    ctx.fail(common::code::kPlacementMismatch, "got " + std::to_string(nPlacements) + " placements for a " +
                                                   std::to_string(mesh.ndim()) + "-d mesh; give one placement per mesh dim");
  }
  for (int64_t i = 0; i < nPlacements; ++i) {
    const Placement p = Placement::decode(static_cast<int32_t>(ctx.intAttr(2 + i)));
    if (!p.isReplicate()) {
      ctx.fail(common::code::kPlacementMismatch,
               "placement " + p.shortName() + " is not available yet: this build creates Replicate tensors only; "
               "use placements [Replicate()] (one per mesh dim)");
    }
    meta.placements.push_back(p);
  }
  cursor = 2 + static_cast<size_t>(nPlacements);
  meta.dtype = dtypeFromCode(static_cast<int>(ctx.intAttr(cursor++)));
  return meta;
}

TensorMeta creationMeta(const InferContext& ctx, size_t& cursor) {
  TensorMeta meta = creationHeader(ctx, cursor);
  const int64_t ndim = ctx.intAttr(cursor++);
  for (int64_t i = 0; i < ndim; ++i) {
    const int64_t size = ctx.intAttr(cursor++);
    if (size < 0) ctx.fail(kInvalidArgument, "negative size " + std::to_string(size) + " in shape");
    meta.shape.push_back(size);
  }
  return meta;
}

at::TensorOptions optionsFor(const KernelContext& ctx) {
  return at::TensorOptions().dtype(ctx.outputMeta().dtype).device(ctx.device);
}

at::IntArrayRef shapeOf(const KernelContext& ctx) { return ctx.outputMeta().shape; }

// full: extra attribute value.
void inferFull(const InferContext& ctx, Outputs& out) {
  size_t cursor = 0;
  TensorMeta meta = creationMeta(ctx, cursor);
  ctx.attr(cursor);  // value must be present
  out.push_back(std::move(meta));
}
void runFull(KernelContext& ctx) {
  const size_t valueIndex = ctx.node.attrs.size() - 1;
  ctx.outputs.push_back(at::full(shapeOf(ctx), ctx.attr(valueIndex), optionsFor(ctx)));
}

void inferEmpty(const InferContext& ctx, Outputs& out) {
  size_t cursor = 0;
  out.push_back(creationMeta(ctx, cursor));
}
void runEmpty(KernelContext& ctx) { ctx.outputs.push_back(at::empty(shapeOf(ctx), optionsFor(ctx))); }

// arange: extra attributes start, end, step; the length follows from them.
void inferArange(const InferContext& ctx, Outputs& out) {
  size_t cursor = 0;
  TensorMeta meta = creationHeader(ctx, cursor);
  const double start = ctx.attr(cursor), end = ctx.attr(cursor + 1), step = ctx.attr(cursor + 2);
  if (step == 0) ctx.fail(kInvalidArgument, "step must be nonzero");
  if ((step > 0 && end < start) || (step < 0 && end > start)) {
    ctx.fail(kInvalidArgument, "upper bound and step are inconsistent: start " + std::to_string(start) + ", end " +
                                   std::to_string(end) + ", step " + std::to_string(step));
  }
  meta.shape.push_back(static_cast<int64_t>(std::ceil((end - start) / step)));
  out.push_back(std::move(meta));
}
void runArange(KernelContext& ctx) {
  const size_t n = ctx.node.attrs.size();
  ctx.outputs.push_back(at::arange(ctx.attr(n - 3), ctx.attr(n - 2), ctx.attr(n - 1), optionsFor(ctx)));
}

// rand / randn: extra attribute seed (assigned at record time when the user gave none).
void inferRandom(const InferContext& ctx, Outputs& out) {
  size_t cursor = 0;
  TensorMeta meta = creationMeta(ctx, cursor);
  ctx.attr(cursor);
  if (!isFloating(meta.dtype)) {
    ctx.fail(common::code::kDtypeMismatch, "random values need a floating dtype, got " +
                                               std::string(dtypeName(meta.dtype)) + "; use float32 (the default)");
  }
  out.push_back(std::move(meta));
}
// Draws on the CPU generator whatever the device, so values do not depend on the device kind.
at::Generator generatorFor(const KernelContext& ctx) {
  return at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(ctx.attr(ctx.node.attrs.size() - 1)));
}
at::TensorOptions cpuOptionsFor(const KernelContext& ctx) { return optionsFor(ctx).device(at::kCPU); }
void runRand(KernelContext& ctx) {
  ctx.outputs.push_back(at::rand(shapeOf(ctx), generatorFor(ctx), cpuOptionsFor(ctx)).to(ctx.device));
}
void runRandn(KernelContext& ctx) {
  ctx.outputs.push_back(at::randn(shapeOf(ctx), generatorFor(ctx), cpuOptionsFor(ctx)).to(ctx.device));
}

// from_data: the full tensor was copied from JS at record time into node.hostData.
void inferFromData(const InferContext& ctx, Outputs& out) { inferEmpty(ctx, out); }
void runFromData(KernelContext& ctx) {
  const at::Tensor& host = ctx.node.hostData;
  // Rank 0 takes the recorded buffer; the others hold copies of their own, as devices would.
  const bool ownCopy = ctx.rank != 0 || ctx.device != host.device();
  ctx.outputs.push_back(ownCopy ? host.to(ctx.device, /*non_blocking=*/false, /*copy=*/true) : host);
}

}  // namespace

void registerCreationOps(OpRegistry& registry) {
  registry.add({"full", 0, "meshId, placements, dtype, shape, value", inferFull, runFull});
  registry.add({"empty", 0, "meshId, placements, dtype, shape", inferEmpty, runEmpty});
  registry.add({"arange", 0, "meshId, placements, dtype, start, end, step", inferArange, runArange});
  registry.add({"rand", 0, "meshId, placements, dtype, shape, seed", inferRandom, runRand});
  registry.add({"randn", 0, "meshId, placements, dtype, shape, seed", inferRandom, runRandn});
  registry.add({"from_data", 0, "meshId, placements, dtype, shape", inferFromData, runFromData});
}

}  // namespace dtorch::core
