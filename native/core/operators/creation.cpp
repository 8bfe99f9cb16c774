// Creation ops: tensors made on a mesh from a shape, a value, a seed or JS data, with any
// placements. Each rank makes only its piece: Shard dims follow torch.chunk; under
// Partial(sum) the ranks at coordinate 0 of every partial mesh dim hold the value and the
// others zeros (Partial avg/max/min: every rank holds it), so reading reduces to the value.
// Attribute layout shared by all of them: meshId, nPlacements, placements..., dtype, then
// (except arange) ndim, shape..., then the op's own attributes.
// Random ops are mesh-independent: every rank draws the full tensor from a generator seeded
// with the seed fixed at record time, then keeps its piece, so a seed gives the same full
// tensor on one device and on any mesh and placements.
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

// Reads meshId, placements and dtype; leaves `cursor` after the dtype. Placements are checked
// against the shape once it is known (checkCreation).
TensorMeta creationHeader(const InferContext& ctx, size_t& cursor) {
  TensorMeta meta;
  meta.meshId = static_cast<int>(ctx.intAttr(0));
  const int64_t nPlacements = ctx.intAttr(1);
  for (int64_t i = 0; i < nPlacements; ++i) meta.placements.push_back(Placement::decode(static_cast<int32_t>(ctx.intAttr(2 + i))));
  cursor = 2 + static_cast<size_t>(nPlacements);
  meta.dtype = dtypeFromCode(static_cast<int>(ctx.intAttr(cursor++)));
  return meta;
}

void checkCreation(const InferContext& ctx, const TensorMeta& meta) {
  checkPlacements(ctx, meta.placements, ctx.meshes.get(meta.meshId), meta.ndim());
  checkByteCount(ctx, meta.shape, meta.dtype);  // memory accounting and LibTorch both need 63 bits
}

// ndim, sizes...: a shape from the attributes at `cursor`.
Shape readShape(const InferContext& ctx, size_t& cursor) {
  Shape shape;
  const int64_t ndim = ctx.intAttr(cursor++);
  for (int64_t i = 0; i < ndim; ++i) {
    const int64_t size = ctx.intAttr(cursor++);
    if (size < 0) ctx.fail(kInvalidArgument, "negative size " + std::to_string(size) + " in shape");
    shape.push_back(size);
  }
  return shape;
}

TensorMeta creationMeta(const InferContext& ctx, size_t& cursor) {
  TensorMeta meta = creationHeader(ctx, cursor);
  meta.shape = readShape(ctx, cursor);
  checkCreation(ctx, meta);
  return meta;
}

at::TensorOptions optionsFor(const KernelContext& ctx) {
  return at::TensorOptions().dtype(ctx.outputMeta().dtype).device(ctx.device);
}

// Under Partial(sum), only the rank at coordinate 0 of every such mesh dim holds the value.
bool holdsPartialValue(const KernelContext& ctx) {
  const auto& placements = ctx.outputMeta().placements;
  const std::vector<int64_t> coords = meshCoords(ctx.mesh, ctx.rank);
  for (size_t d = 0; d < placements.size(); ++d) {
    if (placements[d].isPartial() && placements[d].reduce == ReduceOp::kSum && coords[d] != 0) return false;
  }
  return true;
}

// A host tensor's copy on `device`. On a GPU through pinned memory, queued without waiting: a
// copy from pageable memory would hold the worker until the GPU had run everything queued before
// it, and a loop making a small tensor each step (a timestep) would then idle the GPU every step.
at::Tensor toDevice(const at::Tensor& host, c10::Device device) {
  if (!device.is_cuda()) return host.to(device, /*non_blocking=*/false, /*copy=*/true).contiguous();
  at::Tensor pinned = at::empty(host.sizes(), host.options().pinned_memory(true));
  pinned.copy_(host);
  return pinned.to(device, /*non_blocking=*/true);  // the allocator keeps the pinned block until the copy ran
}

// The rank's piece of a full tensor made the same way on every rank. `owned`: the kernel made
// `full` itself (else it is the node's host data, always copied); made on the rank's device, the
// piece is then taken without a copy.
at::Tensor pieceOf(const KernelContext& ctx, const at::Tensor& full, bool owned = true) {
  const LocalPiece piece = ctx.outputPiece();
  at::Tensor local = full;
  for (size_t dim = 0; dim < piece.shape.size(); ++dim) {
    if (piece.shape[dim] != full.size(static_cast<int64_t>(dim))) {
      local = local.narrow(static_cast<int64_t>(dim), piece.offset[dim], piece.shape[dim]);
    }
  }
  at::Tensor out = owned && full.device() == ctx.device ? local.contiguous() : toDevice(local, ctx.device);
  if (!holdsPartialValue(ctx)) out.zero_();
  return out;
}

// full: extra attribute value, a JS number (an int when integral, as scalar.ts reads it).
void inferFull(const InferContext& ctx, Outputs& out) {
  size_t cursor = 0;
  TensorMeta meta = creationMeta(ctx, cursor);
  const double value = ctx.attr(cursor);
  // as torch.full: float16 and bfloat16 round a too large value to inf, other dtypes refuse it
  const bool rounds = meta.dtype == DType::Half || meta.dtype == DType::BFloat16;
  if (!rounds && !scalarFits(value, kindOfNumber(value), meta.dtype)) {
    ctx.fail(kInvalidArgument, "value " + std::to_string(value) + " does not fit " + std::string(dtypeName(meta.dtype)));
  }
  out.push_back(std::move(meta));
}
void runFull(KernelContext& ctx) {
  const at::Scalar value = holdsPartialValue(ctx) ? numberScalar(ctx.attr(ctx.node.attrs.size() - 1)) : at::Scalar(0);
  const DType dtype = ctx.outputMeta().dtype;
  if ((dtype == DType::Half || dtype == DType::BFloat16) && !scalarFits(value.toDouble(), ScalarKind::kFloat, dtype)) {
    // past the dtype's range: inf, as torch.full gives it, instead of failing fill_'s checked conversion
    const double inf = std::numeric_limits<double>::infinity();
    ctx.outputs.push_back(at::full(ctx.outputPiece().shape, value.toDouble() > 0 ? inf : -inf, optionsFor(ctx)));
    return;
  }
  ctx.outputs.push_back(at::full(ctx.outputPiece().shape, value, optionsFor(ctx)));
}

void inferEmpty(const InferContext& ctx, Outputs& out) {
  size_t cursor = 0;
  out.push_back(creationMeta(ctx, cursor));
}
void runEmpty(KernelContext& ctx) { ctx.outputs.push_back(at::empty(ctx.outputPiece().shape, optionsFor(ctx))); }

// arange: extra attributes start, end, step; the length follows from them. Made by the rank's
// own device where every device gets the same values that way: integer values, exact in the
// float arithmetic a GPU's kernel uses (to 2^24) or in an integer dtype; a timestep embedding's
// or a rotary table's range is one, and stays a kernel a CUDA graph can hold. Any other range
// (a fraction, or past 2^24) is made on the host and copied, as LibTorch's CPU kernel makes it:
// its node carries MadeOnHost, which keeps it out of CUDA graphs too (a graph cannot hold the
// host's part).
struct MadeOnHost final : OpState {};
std::shared_ptr<const OpState> madeOnHost() {
  static const auto state = std::make_shared<const MadeOnHost>();
  return state;
}
bool exactOnEveryDevice(DType dtype, double start, double end, double step) {
  if (c10::isIntegralType(dtype, /*includeBool=*/false)) return true;
  constexpr double kExact = 16777216.0;  // 2^24: float32 holds every integer up to here
  const bool integers = std::trunc(start) == start && std::trunc(step) == step;
  return integers && std::abs(start) <= kExact && std::abs(end) <= kExact;
}
void inferArange(const InferContext& ctx, Outputs& out) {
  size_t cursor = 0;
  TensorMeta meta = creationHeader(ctx, cursor);
  const double start = ctx.attr(cursor), end = ctx.attr(cursor + 1), step = ctx.attr(cursor + 2);
  if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) ctx.fail(kInvalidArgument, "bounds must be finite");
  if (step == 0) ctx.fail(kInvalidArgument, "step must be nonzero");
  if ((step > 0 && end < start) || (step < 0 && end > start)) {
    ctx.fail(kInvalidArgument, "upper bound and step are inconsistent: start " + std::to_string(start) + ", end " +
                                   std::to_string(end) + ", step " + std::to_string(step));
  }
  if (meta.dtype == DType::Bool) ctx.fail(common::code::kDtypeMismatch, "cannot make bool tensors; give a numeric dtype");
  const bool integral = c10::isIntegralType(meta.dtype, /*includeBool=*/false);
  if (integral && (kindOfNumber(start) != ScalarKind::kInt || kindOfNumber(end) != ScalarKind::kInt || kindOfNumber(step) != ScalarKind::kInt)) {
    ctx.fail(kInvalidArgument, "an integer dtype takes integer bounds (inside int64)");
  }
  const double size = std::ceil((end - start) / step);
  if (!(size < 9.2e18)) ctx.fail(kInvalidArgument, "the range holds more elements than 64-bit sizes can count");
  if (integral) {
    // LibTorch counts integer ranges in int64 (ceil((end - start) / step) in integers)
    const __int128 a = static_cast<int64_t>(start), b = static_cast<int64_t>(end), st = static_cast<int64_t>(step);
    const __int128 span = b - a;
    meta.shape.push_back(static_cast<int64_t>(st > 0 ? (span + st - 1) / st : (span + st + 1) / st));
  } else {
    meta.shape.push_back(static_cast<int64_t>(size));
  }
  checkCreation(ctx, meta);
  if (!exactOnEveryDevice(meta.dtype, start, end, step)) ctx.state = madeOnHost();
  out.push_back(std::move(meta));
}
void runArange(KernelContext& ctx) {
  const size_t n = ctx.node.attrs.size();
  const c10::Device where = ctx.node.state ? c10::Device(at::kCPU) : ctx.device;
  const at::Tensor full = at::arange(ctx.attr(n - 3), ctx.attr(n - 2), ctx.attr(n - 1), optionsFor(ctx).device(where));
  ctx.outputs.push_back(pieceOf(ctx, full));
}

// rand / randn / randint: the last attribute is the seed (assigned at record time when the user
// gave none); randint has low, high after the shape. Between those and the seed: the draws a
// dt.Generator made before this one (kind, dtype, ndim, shape..., and low, high for randint),
// then how many attributes they take. The kernel replays them on the seeded generator first, so
// this draw continues the generator's stream as torch's does after the same calls.
constexpr int64_t kDrawRand = 0, kDrawRandn = 1, kDrawRandint = 2;

// Checks the earlier draws at [begin, end): each a known kind, a dtype it can draw, a shape.
void checkEarlierDraws(const InferContext& ctx, size_t begin, size_t end) {
  size_t cursor = begin;
  while (cursor < end) {
    const int64_t kind = ctx.intAttr(cursor++);
    if (kind != kDrawRand && kind != kDrawRandn && kind != kDrawRandint) ctx.fail(kInvalidArgument, "unknown earlier draw kind " + std::to_string(kind));
    const DType dtype = dtypeFromCode(static_cast<int>(ctx.intAttr(cursor++)));
    if (kind != kDrawRandint && !isFloating(dtype)) ctx.fail(common::code::kDtypeMismatch, "an earlier draw of the generator has a non-floating dtype");
    const Shape shape = readShape(ctx, cursor);
    checkByteCount(ctx, shape, dtype);
    if (kind == kDrawRandint) {
      const int64_t low = ctx.intAttr(cursor), high = ctx.intAttr(cursor + 1);
      if (!(high > low)) ctx.fail(kInvalidArgument, "an earlier randint draw has high <= low");
      cursor += 2;
    }
  }
  if (cursor != end) ctx.fail(kInvalidArgument, "the generator's earlier draws overrun their attributes");
}

// The attributes the earlier draws take (the one before the seed), checked against `cursor`,
// where the op's own attributes end.
void checkDrawTail(const InferContext& ctx, size_t cursor) {
  const size_t n = ctx.attrs.size();
  if (n < cursor + 2) ctx.fail(kInvalidArgument, "missing the earlier draws' count and the seed");
  const int64_t slots = ctx.intAttr(n - 2);
  if (slots < 0 || cursor + static_cast<size_t>(slots) + 2 != n) ctx.fail(kInvalidArgument, "the earlier draws' count does not match the attributes");
  checkEarlierDraws(ctx, cursor, n - 2);
  ctx.intAttr(n - 1);
}

void inferRandom(const InferContext& ctx, Outputs& out) {
  size_t cursor = 0;
  TensorMeta meta = creationMeta(ctx, cursor);
  if (!isFloating(meta.dtype)) {
    ctx.fail(common::code::kDtypeMismatch, "random values need a floating dtype, got " +
                                               std::string(dtypeName(meta.dtype)) + "; use float32 (the default)");
  }
  checkDrawTail(ctx, cursor);
  out.push_back(std::move(meta));
}
void inferRandint(const InferContext& ctx, Outputs& out) {
  size_t cursor = 0;
  TensorMeta meta = creationMeta(ctx, cursor);
  const int64_t low = ctx.intAttr(cursor), high = ctx.intAttr(cursor + 1);
  checkDrawTail(ctx, cursor + 2);
  if (!(high > low)) {
    ctx.fail(kInvalidArgument, "high must be greater than low, got low " + std::to_string(low) + " and high " + std::to_string(high));
  }
  if (meta.dtype == DType::Bool) ctx.fail(common::code::kDtypeMismatch, "randint cannot make bool tensors; use int64");
  // as random_: low and high - 1 must be values of the dtype
  const double lo = static_cast<double>(low), hi = static_cast<double>(high - 1);
  if (!scalarFits(lo, ScalarKind::kFloat, meta.dtype) || !scalarFits(hi, ScalarKind::kFloat, meta.dtype)) {  // no uint8 wrap
    ctx.fail(kInvalidArgument, "[" + std::to_string(low) + ", " + std::to_string(high - 1) + "] does not fit " + std::string(dtypeName(meta.dtype)));
  }
  out.push_back(std::move(meta));
}

// Where the earlier draws begin: before them, randint's low and high.
size_t earlierDrawsBegin(const KernelContext& ctx) {
  const size_t n = ctx.node.attrs.size();
  return n - 2 - static_cast<size_t>(ctx.intAttr(n - 2));
}

// Draws on the CPU generator whatever the device, so values do not depend on the device kind;
// the generator's earlier draws are drawn again (and dropped) first.
at::Generator generatorFor(const KernelContext& ctx) {
  const size_t n = ctx.node.attrs.size();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(ctx.attr(n - 1)));
  size_t cursor = earlierDrawsBegin(ctx);
  while (cursor < n - 2) {
    const int64_t kind = ctx.intAttr(cursor++);
    const auto options = at::TensorOptions().dtype(dtypeFromCode(static_cast<int>(ctx.intAttr(cursor++)))).device(at::kCPU);
    std::vector<int64_t> shape(static_cast<size_t>(ctx.intAttr(cursor++)));
    for (auto& size : shape) size = ctx.intAttr(cursor++);
    if (kind == kDrawRand) {
      at::rand(shape, gen, options);
    } else if (kind == kDrawRandn) {
      at::randn(shape, gen, options);
    } else {
      at::randint(ctx.intAttr(cursor), ctx.intAttr(cursor + 1), shape, gen, options);
      cursor += 2;
    }
  }
  return gen;
}
at::TensorOptions cpuOptionsFor(const KernelContext& ctx) { return optionsFor(ctx).device(at::kCPU); }
void runRand(KernelContext& ctx) {
  ctx.outputs.push_back(pieceOf(ctx, at::rand(ctx.outputMeta().shape, generatorFor(ctx), cpuOptionsFor(ctx))));
}
void runRandn(KernelContext& ctx) {
  ctx.outputs.push_back(pieceOf(ctx, at::randn(ctx.outputMeta().shape, generatorFor(ctx), cpuOptionsFor(ctx))));
}
void runRandint(KernelContext& ctx) {
  const size_t begin = earlierDrawsBegin(ctx);
  const auto low = static_cast<int64_t>(ctx.attr(begin - 2)), high = static_cast<int64_t>(ctx.attr(begin - 1));
  ctx.outputs.push_back(pieceOf(ctx, at::randint(low, high, ctx.outputMeta().shape, generatorFor(ctx), cpuOptionsFor(ctx))));
}

// from_data: the full tensor was copied from JS at record time into node.hostData.
void inferFromData(const InferContext& ctx, Outputs& out) { inferEmpty(ctx, out); }
void runFromData(KernelContext& ctx) { ctx.outputs.push_back(pieceOf(ctx, ctx.node.hostData, /*owned=*/false)); }

// from_local_data: each rank's own piece (as DTensor.from_local), so no rank ever holds the full
// tensor. node.hostData is 1-D: the distinct pieces concatenated (ranks of a Replicate group may
// share one). Attributes after the dtype: 1, hostElements (the host data's shape), ndim, global
// shape..., then one element offset into the host data per rank. Every rank's piece must lie
// inside the host data; its size follows from the global shape and the placements.
void inferFromLocalData(const InferContext& ctx, Outputs& out) {
  size_t cursor = 0;
  TensorMeta meta = creationHeader(ctx, cursor);
  if (ctx.intAttr(cursor++) != 1) ctx.fail(kInvalidArgument, "the host data must be 1-D (the pieces concatenated)");
  const int64_t hostElements = ctx.intAttr(cursor++);
  meta.shape = readShape(ctx, cursor);
  checkCreation(ctx, meta);
  const DeviceMesh& mesh = ctx.meshes.get(meta.meshId);
  for (int rank = 0; rank < mesh.size(); ++rank) {
    const int64_t offset = ctx.intAttr(cursor + static_cast<size_t>(rank));
    const Shape local = localPiece(meta.shape, meta.placements, mesh, rank).shape;
    int64_t numel = 1;
    for (int64_t s : local) numel *= s;
    if (offset < 0 || offset + numel > hostElements) {
      ctx.fail(kInvalidArgument, "rank " + std::to_string(rank) + "'s piece " + formatShape(local) + " at element " +
                                     std::to_string(offset) + " does not fit in the " + std::to_string(hostElements) +
                                     " elements given");
    }
  }
  if (ctx.attrs.size() != cursor + static_cast<size_t>(mesh.size())) {
    ctx.fail(kInvalidArgument, "expected one piece offset per rank (" + std::to_string(mesh.size()) + "), got " +
                                   std::to_string(static_cast<int64_t>(ctx.attrs.size()) - static_cast<int64_t>(cursor)));
  }
  out.push_back(std::move(meta));
}
void runFromLocalData(KernelContext& ctx) {
  const LocalPiece piece = ctx.outputPiece();
  int64_t numel = 1;
  for (int64_t s : piece.shape) numel *= s;
  const int64_t offset = ctx.intAttr(ctx.node.attrs.size() - static_cast<size_t>(ctx.mesh.size()) + static_cast<size_t>(ctx.rank));
  const at::Tensor local = ctx.node.hostData.narrow(0, offset, numel).view(piece.shape);
  ctx.outputs.push_back(toDevice(local, ctx.device));
}

}  // namespace

void registerCreationOps(OpRegistry& registry) {
  // computed on the host and copied to the device: never captured into a CUDA graph
  auto onHost = [](OpDef def) {
    def.hostSide = true;
    return def;
  };
  registry.add({"full", 0, "meshId, nPlacements, placements..., dtype, ndim, shape..., value", inferFull, runFull});
  registry.add({"empty", 0, "meshId, nPlacements, placements..., dtype, ndim, shape...", inferEmpty, runEmpty});
  registry.add({"arange", 0, "meshId, nPlacements, placements..., dtype, start, end, step", inferArange, runArange});
  registry.add(onHost({"rand", 0, "meshId, nPlacements, placements..., dtype, ndim, shape..., earlier draws..., nDrawAttrs, seed", inferRandom, runRand}));
  registry.add(onHost({"randn", 0, "meshId, nPlacements, placements..., dtype, ndim, shape..., earlier draws..., nDrawAttrs, seed", inferRandom, runRandn}));
  registry.add(onHost({"randint", 0, "meshId, nPlacements, placements..., dtype, ndim, shape..., low, high, earlier draws..., nDrawAttrs, seed", inferRandint, runRandint}));
  registry.add(onHost({"from_data", 0, "meshId, nPlacements, placements..., dtype, ndim, shape...", inferFromData, runFromData}));
  registry.add(onHost({"from_local_data", 0, "meshId, nPlacements, placements..., dtype, 1, hostElements, ndim, shape..., offset per rank",
                       inferFromLocalData, runFromLocalData}));
}

}  // namespace dtorch::core
