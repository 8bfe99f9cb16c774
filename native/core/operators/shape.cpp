// Shape and view ops: reshape (and through it view, flatten, unflatten, squeeze, unsqueeze),
// permute, expand, contiguous, clone, cat, split, join_shards, split_shards, slice, index_select,
// repeat, pad.
// Views stay views of their input's buffer on each rank, as in PyTorch.
#include <ATen/ATen.h>

#include "common/error.h"
#include "core/operand/mesh_table.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"
#include "external/cuda/cat_rows.h"

namespace dtorch::core {
namespace {

using common::code::kInvalidArgument;
using common::code::kShapeMismatch;

Shape shapeAttr(const InferContext& ctx, size_t at) {
  Shape s;
  for (int64_t i = 0; i < ctx.intAttr(at); ++i) s.push_back(ctx.intAttr(at + 1 + i));
  return s;
}
std::vector<int64_t> kernelList(const KernelContext& ctx, size_t at) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < ctx.intAttr(at); ++i) v.push_back(ctx.intAttr(at + 1 + i));
  return v;
}

// Partial sums and averages pass through every linear data movement.
void partialRows(size_t inputs, SignatureRows& rows) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) rows.push_back(row(Placements(inputs, Placement::partial(op)), Placement::partial(op)));
}
// Shards of every dim except `skip` pass through; partials too.
void passRows(const InferContext& ctx, int64_t skip, SignatureRows& rows) {
  for (int32_t d = 0; d < ctx.inputs[0]->ndim(); ++d) {
    if (d != skip) rows.push_back(row(Placements(ctx.inputs.size(), Placement::shard(d)), Placement::shard(d)));
  }
  partialRows(ctx.inputs.size(), rows);
}
void linearShapeRows(const InferContext& ctx, SignatureRows& rows) { passRows(ctx, -1, rows); }

// ---- reshape: attrs ndim, shape... (one -1 allowed) ---------------------------------------

// The requested shape with its -1 resolved; throws when it does not fit the input.
Shape reshapeTarget(const InferContext& ctx) {
  const TensorMeta& in = *ctx.inputs[0];
  Shape shape = shapeAttr(ctx, 0);
  int64_t known = 1, inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred >= 0) ctx.fail(kInvalidArgument, "only one dim may be -1, got " + formatShape(shape));
      inferred = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      ctx.fail(kInvalidArgument, "invalid size " + std::to_string(shape[i]) + " in " + formatShape(shape));
    } else {
      known = checkedMul(ctx, known, shape[i]);
    }
  }
  if (inferred >= 0) {
    if (known == 0 || in.numel() % known != 0) {
      ctx.fail(kShapeMismatch, "shape " + formatShape(shape) + " is invalid for input of shape " + formatShape(in.shape));
    }
    shape[inferred] = in.numel() / known;
  }
  int64_t numel = 1;
  for (int64_t s : shape) numel = checkedMul(ctx, numel, s);
  if (numel != in.numel()) {
    ctx.fail(kShapeMismatch, "shape " + formatShape(shape) + " holds " + std::to_string(numel) + " elements but the input of shape " +
                                 formatShape(in.shape) + " has " + std::to_string(in.numel()));
  }
  return shape;
}

void inferReshape(const InferContext& ctx, Outputs& out) {
  out.push_back(outputLike(ctx, reshapeTarget(ctx), ctx.inputs[0]->dtype));
}

// Groups input dims and output dims whose products match (size-1 dims left out). A shard of a
// group's first input dim maps to the group's first output dim: always when the group is one
// dim on both sides; for merges and splits only when the sharded size divides evenly over the
// mesh (else the pieces would differ from torch.chunk's). Other sharded dims are split across
// devices by the reshape: no row, the call is refused.
void reshapeRows(const InferContext& ctx, SignatureRows& rows) {
  const Shape& a = ctx.inputs[0]->shape;
  const Shape b = reshapeTarget(ctx);
  partialRows(1, rows);
  if (ctx.inputs[0]->numel() == 0) return;
  // how many pieces each input dim is cut into: the product of the mesh dims that shard it (a
  // merge or split keeps a shard only where its pieces divide the outer size evenly)
  const DeviceMesh& mesh = ctx.meshes.get(ctx.inputs[0]->meshId);
  std::vector<int64_t> pieces(a.size(), 1);
  const Placements& placements = ctx.inputs[0]->placements;
  for (size_t d = 0; d < placements.size(); ++d) {
    if (placements[d].isShard() && placements[d].dim >= 0 && placements[d].dim < static_cast<int32_t>(a.size())) pieces[placements[d].dim] *= mesh.shape[d];
  }
  std::vector<int64_t> ai, bi;
  for (int64_t i = 0; i < static_cast<int64_t>(a.size()); ++i) {
    if (a[i] != 1) ai.push_back(i);
  }
  for (int64_t j = 0; j < static_cast<int64_t>(b.size()); ++j) {
    if (b[j] != 1) bi.push_back(j);
  }
  size_t x = 0, y = 0;
  while (x < ai.size() && y < bi.size()) {
    const size_t x0 = x, y0 = y;
    int64_t pa = a[ai[x++]], pb = b[bi[y++]];
    while (pa != pb) {
      if (pa < pb && x < ai.size()) pa *= a[ai[x++]];
      else if (pb < pa && y < bi.size()) pb *= b[bi[y++]];
      else return;
    }
    const bool oneToOne = x - x0 == 1 && y - y0 == 1;
    const bool merge = x - x0 > 1 && y - y0 == 1 && a[ai[x0]] % pieces[ai[x0]] == 0;
    const bool split = x - x0 == 1 && y - y0 > 1 && b[bi[y0]] % pieces[ai[x0]] == 0;
    if (oneToOne || merge || split) {
      rows.push_back(row({Placement::shard(static_cast<int32_t>(ai[x0]))}, Placement::shard(static_cast<int32_t>(bi[y0]))));
    }
  }
}
void runReshape(KernelContext& ctx) { ctx.outputs.push_back(at::reshape(ctx.input(0), ctx.outputPiece().shape)); }

// ---- permute: attrs ndim, dims... ----------------------------------------------------------

void inferPermute(const InferContext& ctx, Outputs& out) {
  const TensorMeta& in = *ctx.inputs[0];
  const Shape dims = shapeAttr(ctx, 0);
  if (static_cast<int64_t>(dims.size()) != in.ndim()) {
    ctx.fail(kInvalidArgument, "got " + std::to_string(dims.size()) + " dims for a " + std::to_string(in.ndim()) + "-d tensor");
  }
  std::vector<bool> seen(dims.size(), false);
  Shape shape;
  for (int64_t d : dims) {
    const int64_t n = normalizeDim(ctx, d, in.ndim());
    if (seen[n]) ctx.fail(kInvalidArgument, "dim " + std::to_string(n) + " appears twice in " + formatShape(dims));
    seen[n] = true;
    shape.push_back(in.shape[n]);
  }
  out.push_back(outputLike(ctx, std::move(shape), in.dtype));
}
void permuteRows(const InferContext& ctx, SignatureRows& rows) {
  const Shape dims = shapeAttr(ctx, 0);
  for (int32_t o = 0; o < static_cast<int32_t>(dims.size()); ++o) {
    const int64_t i = dims[o] < 0 ? dims[o] + static_cast<int64_t>(dims.size()) : dims[o];
    rows.push_back(row({Placement::shard(static_cast<int32_t>(i))}, Placement::shard(o)));
  }
  partialRows(1, rows);
}
void runPermute(KernelContext& ctx) { ctx.outputs.push_back(ctx.input(0).permute(kernelList(ctx, 0))); }

// ---- expand: attrs ndim, sizes... (-1 keeps a dim) -------------------------------------------

void inferExpand(const InferContext& ctx, Outputs& out) {
  const TensorMeta& in = *ctx.inputs[0];
  Shape shape = shapeAttr(ctx, 0);
  const int64_t n = static_cast<int64_t>(shape.size());
  if (n < in.ndim()) ctx.fail(kShapeMismatch, "cannot expand shape " + formatShape(in.shape) + " to fewer dims " + formatShape(shape));
  for (int64_t o = 0; o < n; ++o) {
    const int64_t i = o - (n - in.ndim());
    if (i < 0) {
      if (shape[o] < 0) ctx.fail(kInvalidArgument, "-1 is not allowed for a new leading dim, got " + formatShape(shape));
      continue;
    }
    if (shape[o] == -1) shape[o] = in.shape[i];
    if (in.shape[i] != shape[o] && in.shape[i] != 1) {
      ctx.fail(kShapeMismatch, "cannot expand shape " + formatShape(in.shape) + " to " + formatShape(shape) + ": dim " +
                                   std::to_string(i) + " has size " + std::to_string(in.shape[i]) + " (only size-1 dims expand)");
    }
  }
  out.push_back(outputLike(ctx, std::move(shape), in.dtype));
}
void expandRows(const InferContext& ctx, SignatureRows& rows) {
  const Shape& in = ctx.inputs[0]->shape;
  Shape shape = shapeAttr(ctx, 0);
  const int64_t n = static_cast<int64_t>(shape.size());
  for (int64_t o = 0; o < n; ++o) {
    const int64_t i = o - (n - static_cast<int64_t>(in.size()));
    if (i >= 0 && (shape[o] == -1 || shape[o] == in[i])) {
      rows.push_back(row({Placement::shard(static_cast<int32_t>(i))}, Placement::shard(static_cast<int32_t>(o))));
    }
  }
  partialRows(1, rows);
}
void runExpand(KernelContext& ctx) { ctx.outputs.push_back(ctx.input(0).expand(ctx.outputPiece().shape)); }

// ---- contiguous, clone ------------------------------------------------------------------------

void inferSame(const InferContext& ctx, Outputs& out) {
  out.push_back(outputLike(ctx, ctx.inputs[0]->shape, ctx.inputs[0]->dtype));
}
void runContiguous(KernelContext& ctx) { ctx.outputs.push_back(ctx.input(0).contiguous()); }
void runClone(KernelContext& ctx) { ctx.outputs.push_back(ctx.input(0).clone(at::MemoryFormat::Contiguous)); }

// ---- cat: any number of inputs; attrs dim --------------------------------------------------

void inferCat(const InferContext& ctx, Outputs& out) {
  const TensorMeta& first = *ctx.inputs[0];
  for (size_t k = 0; k < ctx.inputs.size(); ++k) {
    if (ctx.inputs[k]->ndim() == 0) {
      ctx.fail(kShapeMismatch, "zero-dimensional tensor (input #" + std::to_string(k) + ") cannot be concatenated; use stack");
    }
  }
  const int64_t dim = normalizeDim(ctx, ctx.intAttr(0), first.ndim());
  Shape shape = first.shape;
  for (size_t k = 1; k < ctx.inputs.size(); ++k) {
    const TensorMeta& t = *ctx.inputs[k];
    bool ok = t.ndim() == first.ndim();
    for (int64_t d = 0; ok && d < first.ndim(); ++d) ok = d == dim || t.shape[d] == first.shape[d];
    if (!ok) {
      ctx.fail(kShapeMismatch, "input #" + std::to_string(k) + " has shape " + formatShape(t.shape) + " but input #0 has " +
                                   formatShape(first.shape) + "; sizes must match except in dim " + std::to_string(dim));
    }
    shape[dim] = checkedAdd(ctx, shape[dim], t.shape[dim]);
  }
  out.push_back(outputLike(ctx, std::move(shape), resultType(ctx.inputs, {})));
}
void catRows(const InferContext& ctx, SignatureRows& rows) {
  passRows(ctx, normalizeDim(ctx, ctx.intAttr(0), ctx.inputs[0]->ndim()), rows);
}
// Parts that lie one after another in one buffer, each contiguous and of the output's dtype,
// joined along their first dim (all dims before `dim` of size 1): that buffer's run, as a view
// instead of a copy. Projections packed side by side (@dtorch/hf's PackedProjections) are joined
// so for their one matmul. Nothing writes into a buffer another tensor shares (in-place reuse
// needs a storage of its own), so the view behaves as the copy would.
std::optional<at::Tensor> adjacentRun(const std::vector<at::Tensor>& parts, int64_t dim, at::ScalarType dtype) {
  const at::Tensor& first = parts[0];
  for (int64_t d = 0; d < dim; ++d) {
    if (first.size(d) != 1) return std::nullopt;
  }
  int64_t next = first.storage_offset(), along = 0;
  for (const at::Tensor& t : parts) {
    if (t.scalar_type() != dtype || !t.is_contiguous() || !t.storage().is_alias_of(first.storage()) || t.storage_offset() != next) return std::nullopt;
    next += t.numel();
    along += t.size(dim);
  }
  std::vector<int64_t> sizes(first.sizes().begin(), first.sizes().end());
  sizes[dim] = along;
  return first.as_strided(sizes, c10::contiguous_strides(sizes), first.storage_offset());
}

void runCat(KernelContext& ctx) {
  std::vector<at::Tensor> parts;
  for (const at::Tensor* t : ctx.inputs) parts.push_back(*t);
  int64_t dim = ctx.intAttr(0);
  if (dim < 0) dim += parts[0].dim();
  if (std::optional<at::Tensor> run = adjacentRun(parts, dim, ctx.outputMeta().dtype)) {
    ctx.outputs.push_back(*run);
    return;
  }
  // strided parts on a GPU (head-major views of token-major keys): a row copy, not LibTorch's
  // element-by-element path
  std::optional<at::Tensor> copied = external::cuda::catRows(parts, dim);
  ctx.outputs.push_back((copied ? *copied : at::cat(parts, dim)).to(ctx.outputMeta().dtype));
}

// ---- split: attrs dim, nSizes, sizes... (one output per size) ---------------------------------

void inferSplit(const InferContext& ctx, Outputs& out) {
  const TensorMeta& in = *ctx.inputs[0];
  if (in.ndim() == 0) ctx.fail(kShapeMismatch, "needs at least a 1-d tensor, got a 0-d one");
  const int64_t dim = normalizeDim(ctx, ctx.intAttr(0), in.ndim());
  const Shape sizes = shapeAttr(ctx, 1);
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) ctx.fail(kInvalidArgument, "negative split size in " + formatShape(sizes));
    total = checkedAdd(ctx, total, s);
  }
  if (total != in.shape[dim]) {
    ctx.fail(kShapeMismatch, "split sizes " + formatShape(sizes) + " add up to " + std::to_string(total) + " but dim " +
                                 std::to_string(dim) + " has size " + std::to_string(in.shape[dim]));
  }
  for (int64_t s : sizes) {
    Shape shape = in.shape;
    shape[dim] = s;
    out.push_back(outputLike(ctx, std::move(shape), in.dtype));
  }
}
void splitRows(const InferContext& ctx, SignatureRows& rows) {
  passRows(ctx, normalizeDim(ctx, ctx.intAttr(0), ctx.inputs[0]->ndim()), rows);
}
void runSplit(KernelContext& ctx) {
  for (at::Tensor& t : at::split_with_sizes(ctx.input(0), kernelList(ctx, 1), ctx.intAttr(0))) ctx.outputs.push_back(t);
}

// ---- join_shards / split_shards: cat and split piece by piece ------------------------------
// Parts sharded alike on `dim` are joined with no data moving: each rank's piece of the result
// is the local cat of its pieces of the parts. The global order is therefore piece by piece
// (part 0's piece 0, part 1's piece 0, ..., part 0's piece 1, ...), not torch.cat's; with `dim`
// unsharded it is torch.cat. The result is a Shard(dim) only when, on every rank, the parts'
// pieces add up to the piece torch.chunk gives that rank of the joined length: infer checks it.
// split_shards is the inverse: each rank splits its piece into the parts' pieces on that rank.

// `dim`'s size on `rank` for a tensor of `shape` placed as `placements`.
int64_t pieceLength(const Shape& shape, const Placements& placements, const DeviceMesh& mesh, int rank, int64_t dim) {
  return localPiece(shape, placements, mesh, rank).shape[dim];
}

// Fails unless the parts' pieces make the whole's piece on every rank (parts placed alike).
void checkPieces(const InferContext& ctx, const std::vector<Shape>& parts, const Shape& whole, const Placements& placements, int64_t dim,
                 const char* remedy) {
  const DeviceMesh& mesh = ctx.meshes.get(commonMesh(ctx));
  int64_t pieces = 1;
  for (size_t d = 0; d < placements.size(); ++d) {
    if (placements[d].isShard() && placements[d].dim == dim) pieces *= mesh.shape[d];
  }
  if (pieces == 1) return;  // dim is whole on every rank: torch.cat / split
  for (int rank = 0; rank < mesh.size(); ++rank) {
    int64_t sum = 0;
    std::string terms;
    for (const Shape& part : parts) {
      const int64_t n = pieceLength(part, placements, mesh, rank, dim);
      sum += n;
      terms += (terms.empty() ? "" : " + ") + std::to_string(n);
    }
    const int64_t want = pieceLength(whole, placements, mesh, rank, dim);
    if (sum == want) continue;
    std::string lengths;
    for (const Shape& part : parts) lengths += (lengths.empty() ? "" : ", ") + std::to_string(part[dim]);
    ctx.fail(kShapeMismatch, "parts of lengths [" + lengths + "] along dim " + std::to_string(dim) + ", each in " + std::to_string(pieces) +
                                 " pieces (" + formatPlacements(placements) + "), do not make a Shard(" + std::to_string(dim) + ") of length " +
                                 std::to_string(whole[dim]) + ": rank " + std::to_string(rank) + " holds " + terms + " = " + std::to_string(sum) +
                                 " but torch.chunk gives it " + std::to_string(want) +
                                 "; this holds when at most one part's length is not a multiple of " + std::to_string(pieces) +
                                 " and that part's torch.chunk pieces are full but the last (333 over 2, 4 or 8 pieces; not 5 over 4); " + remedy);
  }
}

bool placedAlike(c10::ArrayRef<const TensorMeta*> inputs) {
  for (const TensorMeta* t : inputs) {
    if (!(t->placements == inputs[0]->placements)) return false;
  }
  return true;
}

void inferJoinShards(const InferContext& ctx, Outputs& out) {
  inferCat(ctx, out);
  // parts placed differently match no signature row: the matcher names them
  if (!placedAlike(ctx.inputs)) return;
  const int64_t dim = normalizeDim(ctx, ctx.intAttr(0), ctx.inputs[0]->ndim());
  std::vector<Shape> parts;
  for (const TensorMeta* t : ctx.inputs) parts.push_back(t->shape);
  checkPieces(ctx, parts, out[0].shape, ctx.inputs[0]->placements, dim, "choose such lengths, or gather the parts on those mesh dims and use cat");
}

void inferSplitShards(const InferContext& ctx, Outputs& out) {
  inferSplit(ctx, out);
  const TensorMeta& in = *ctx.inputs[0];
  const int64_t dim = normalizeDim(ctx, ctx.intAttr(0), in.ndim());
  std::vector<Shape> parts;
  for (const TensorMeta& t : out) parts.push_back(t.shape);
  checkPieces(ctx, parts, in.shape, in.placements, dim, "choose such sizes, or gather the tensor on those mesh dims and use split");
}
// each rank's pieces of the parts: their lengths on this rank
void runSplitShards(KernelContext& ctx) {
  const int64_t dim = ctx.intAttr(0) < 0 ? ctx.intAttr(0) + ctx.input(0).dim() : ctx.intAttr(0);
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < ctx.node.outputMetas.size(); ++i) sizes.push_back(ctx.outputPiece(i).shape[dim]);
  for (at::Tensor& t : at::split_with_sizes(ctx.input(0), sizes, dim)) ctx.outputs.push_back(t);
}

// ---- slice: attrs dim, start, end, step (Python slice semantics, clamped) ---------------------

struct SliceArgs {
  int64_t dim, start, end, step, size;
};
SliceArgs sliceArgs(const InferContext& ctx) {
  const TensorMeta& in = *ctx.inputs[0];
  if (in.ndim() == 0) ctx.fail(kShapeMismatch, "cannot be applied to a 0-d tensor");
  SliceArgs s{normalizeDim(ctx, ctx.intAttr(0), in.ndim()), ctx.intAttr(1), ctx.intAttr(2), ctx.intAttr(3), 0};
  if (s.step <= 0) ctx.fail(kInvalidArgument, "slice step must be positive, got " + std::to_string(s.step));
  const int64_t n = in.shape[s.dim];
  auto clampIndex = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  s.start = clampIndex(s.start);
  s.end = std::max(clampIndex(s.end), s.start);
  s.size = (s.end - s.start + s.step - 1) / s.step;
  return s;
}
void inferSlice(const InferContext& ctx, Outputs& out) {
  const SliceArgs s = sliceArgs(ctx);
  Shape shape = ctx.inputs[0]->shape;
  shape[s.dim] = s.size;
  // kernels read the clamped bounds from the derived attributes
  ctx.derived.push_back(static_cast<double>(s.start));
  ctx.derived.push_back(static_cast<double>(s.end));
  out.push_back(outputLike(ctx, std::move(shape), ctx.inputs[0]->dtype));
}
void sliceRows(const InferContext& ctx, SignatureRows& rows) { passRows(ctx, sliceArgs(ctx).dim, rows); }
void runSlice(KernelContext& ctx) {
  const size_t n = ctx.node.attrs.size();
  ctx.outputs.push_back(ctx.input(0).slice(ctx.intAttr(0), ctx.intAttr(n - 2), ctx.intAttr(n - 1), ctx.intAttr(3)));
}

// ---- slice_scatter(x, src): attrs dim, start, end, step (x with src written into that slice) ----

void inferSliceScatter(const InferContext& ctx, Outputs& out) {
  const SliceArgs s = sliceArgs(ctx);
  Shape region = ctx.inputs[0]->shape;
  region[s.dim] = s.size;
  if (ctx.inputs[1]->shape != region) {
    ctx.fail(kShapeMismatch, "src of shape " + formatShape(ctx.inputs[1]->shape) + " does not fill the slice of shape " + formatShape(region));
  }
  ctx.derived.push_back(static_cast<double>(s.start));
  ctx.derived.push_back(static_cast<double>(s.end));
  out.push_back(outputLike(ctx, ctx.inputs[0]->shape, ctx.inputs[0]->dtype));
}
void runSliceScatter(KernelContext& ctx) {
  const size_t n = ctx.node.attrs.size();
  const at::Tensor src = ctx.input(1).to(ctx.input(0).scalar_type());
  ctx.outputs.push_back(at::slice_scatter(ctx.input(0), src, ctx.intAttr(0), ctx.intAttr(n - 2), ctx.intAttr(n - 1), ctx.intAttr(3)));
}

// ---- index_select(x, index): attrs dim ---------------------------------------------------------

void inferIndexSelect(const InferContext& ctx, Outputs& out) {
  const TensorMeta &in = *ctx.inputs[0], &index = *ctx.inputs[1];
  if (in.ndim() == 0) ctx.fail(kShapeMismatch, "needs at least a 1-d tensor, got a 0-d one");
  const int64_t dim = normalizeDim(ctx, ctx.intAttr(0), in.ndim());
  if (index.ndim() != 1 || (index.dtype != DType::Long && index.dtype != DType::Int)) {
    ctx.fail(kInvalidArgument, "index must be a 1-d int64 or int32 tensor, got " + std::string(dtypeName(index.dtype)) + " " +
                                   formatShape(index.shape));
  }
  Shape shape = in.shape;
  shape[dim] = index.shape[0];
  out.push_back(outputLike(ctx, std::move(shape), in.dtype));
}
// The index stays whole (Replicate); shards of other dims pass, and so do partials.
void indexSelectRows(const InferContext& ctx, SignatureRows& rows) {
  const int64_t dim = normalizeDim(ctx, ctx.intAttr(0), ctx.inputs[0]->ndim());
  for (int32_t d = 0; d < ctx.inputs[0]->ndim(); ++d) {
    if (d != dim) rows.push_back(row({Placement::shard(d), Placement::replicate()}, Placement::shard(d)));
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) rows.push_back(row({Placement::partial(op), Placement::replicate()}, Placement::partial(op)));
}
void runIndexSelect(KernelContext& ctx) { ctx.outputs.push_back(at::index_select(ctx.input(0), ctx.intAttr(0), ctx.input(1))); }

// ---- index_copy(x, index, src): attrs dim (x with src's slices written at the index) ----------

void inferIndexCopy(const InferContext& ctx, Outputs& out) {
  const TensorMeta &in = *ctx.inputs[0], &index = *ctx.inputs[1], &src = *ctx.inputs[2];
  if (in.ndim() == 0) ctx.fail(kShapeMismatch, "needs at least a 1-d tensor, got a 0-d one");
  const int64_t dim = normalizeDim(ctx, ctx.intAttr(0), in.ndim());
  if (index.ndim() != 1 || index.dtype != DType::Long) {
    ctx.fail(kInvalidArgument, "index must be a 1-d int64 tensor, got " + std::string(dtypeName(index.dtype)) + " " + formatShape(index.shape));
  }
  Shape region = in.shape;
  region[dim] = index.shape[0];
  if (src.shape != region) {
    ctx.fail(kShapeMismatch, "source of shape " + formatShape(src.shape) + " does not fill the indexed region " + formatShape(region));
  }
  out.push_back(outputLike(ctx, in.shape, in.dtype));
}
// Shards of the other dims pass when the source shards alike and the index stays whole.
void indexCopyRows(const InferContext& ctx, SignatureRows& rows) {
  const int64_t dim = normalizeDim(ctx, ctx.intAttr(0), ctx.inputs[0]->ndim());
  for (int32_t d = 0; d < ctx.inputs[0]->ndim(); ++d) {
    if (d != dim) rows.push_back(row({Placement::shard(d), Placement::replicate(), Placement::shard(d)}, Placement::shard(d)));
  }
}
void runIndexCopy(KernelContext& ctx) {
  ctx.outputs.push_back(at::index_copy(ctx.input(0), ctx.intAttr(0), ctx.input(1), ctx.input(2).to(ctx.input(0).scalar_type())));
}

// ---- repeat: attrs ndim, repeats... --------------------------------------------------------------

void inferRepeat(const InferContext& ctx, Outputs& out) {
  const TensorMeta& in = *ctx.inputs[0];
  const Shape reps = shapeAttr(ctx, 0);
  if (static_cast<int64_t>(reps.size()) < in.ndim()) {
    ctx.fail(kInvalidArgument, "needs at least one repeat per dim (" + std::to_string(in.ndim()) + "), got " + formatShape(reps));
  }
  Shape shape(reps.size(), 1);
  const int64_t lead = static_cast<int64_t>(reps.size()) - in.ndim();
  for (size_t o = 0; o < reps.size(); ++o) {
    if (reps[o] < 0) ctx.fail(kInvalidArgument, "negative repeat in " + formatShape(reps));
    const int64_t i = static_cast<int64_t>(o) - lead;
    shape[o] = checkedMul(ctx, reps[o], i >= 0 ? in.shape[i] : 1);
  }
  out.push_back(outputLike(ctx, std::move(shape), in.dtype));
}
void repeatRows(const InferContext& ctx, SignatureRows& rows) {
  const Shape reps = shapeAttr(ctx, 0);
  const int64_t lead = static_cast<int64_t>(reps.size()) - ctx.inputs[0]->ndim();
  for (int32_t i = 0; i < ctx.inputs[0]->ndim(); ++i) {
    if (reps[lead + i] == 1) rows.push_back(row({Placement::shard(i)}, Placement::shard(static_cast<int32_t>(lead + i))));
  }
  partialRows(1, rows);
}
void runRepeat(KernelContext& ctx) { ctx.outputs.push_back(ctx.input(0).repeat(kernelList(ctx, 0))); }

// ---- pad (constant): attrs nPads, pads... (last dim first, as torch.nn.functional.pad), value ----

void inferPad(const InferContext& ctx, Outputs& out) {
  const TensorMeta& in = *ctx.inputs[0];
  const Shape pads = shapeAttr(ctx, 0);
  if (pads.size() % 2 != 0 || static_cast<int64_t>(pads.size()) > 2 * in.ndim()) {
    ctx.fail(kInvalidArgument, "pad needs pairs (before, after) for at most " + std::to_string(in.ndim()) + " dims, got " + formatShape(pads));
  }
  const double value = ctx.attr(1 + pads.size());
  // F.pad's value is a float: it must fit the dtype as one (constant_pad_nd checks it in the kernel)
  if (!scalarFits(value, ScalarKind::kFloat, in.dtype)) {
    ctx.fail(kInvalidArgument, "value " + std::to_string(value) + " does not fit " + std::string(dtypeName(in.dtype)));
  }
  Shape shape = in.shape;
  for (size_t p = 0; p < pads.size() / 2; ++p) {
    const int64_t d = in.ndim() - 1 - static_cast<int64_t>(p);
    shape[d] = checkedAdd(ctx, shape[d], checkedAdd(ctx, pads[2 * p], pads[2 * p + 1]));
    if (shape[d] < 0) ctx.fail(kShapeMismatch, "padding makes dim " + std::to_string(d) + " negative");
  }
  out.push_back(outputLike(ctx, std::move(shape), in.dtype));
}
// Unpadded dims keep their shards; zero padding keeps partial sums partial.
void padRows(const InferContext& ctx, SignatureRows& rows) {
  const Shape pads = shapeAttr(ctx, 0);
  const int64_t firstPadded = ctx.inputs[0]->ndim() - static_cast<int64_t>(pads.size() / 2);
  for (int32_t d = 0; d < ctx.inputs[0]->ndim(); ++d) {
    const int64_t p = ctx.inputs[0]->ndim() - 1 - d;
    const bool padded = d >= firstPadded && (pads[2 * p] != 0 || pads[2 * p + 1] != 0);
    if (!padded) rows.push_back(row({Placement::shard(d)}, Placement::shard(d)));
  }
  if (ctx.attr(1 + pads.size()) == 0) partialRows(1, rows);
}
void runPad(KernelContext& ctx) {
  const std::vector<int64_t> pads = kernelList(ctx, 0);
  ctx.outputs.push_back(at::constant_pad_nd(ctx.input(0), pads, ctx.attr(1 + pads.size())));
}

}  // namespace

void registerShapeOps(OpRegistry& registry) {
  registry.add({"reshape", 1, "ndim, shape... (one -1)", inferReshape, runReshape, reshapeRows});
  registry.add({"permute", 1, "ndim, dims...", inferPermute, runPermute, permuteRows});
  registry.add({"expand", 1, "ndim, sizes... (-1 keeps)", inferExpand, runExpand, expandRows});
  registry.add({"contiguous", 1, "", inferSame, runContiguous, linearShapeRows});
  registry.add({"clone", 1, "", inferSame, runClone, linearShapeRows});
  registry.add({"cat", -1, "dim", inferCat, runCat, catRows});
  registry.add({"split", 1, "dim, nSizes, sizes...", inferSplit, runSplit, splitRows});
  registry.add({"join_shards", -1, "dim", inferJoinShards, runCat, linearShapeRows});
  registry.add({"split_shards", 1, "dim, nSizes, sizes...", inferSplitShards, runSplitShards, linearShapeRows});
  registry.add({"slice", 1, "dim, start, end, step", inferSlice, runSlice, sliceRows});
  registry.add({"index_select", 2, "dim", inferIndexSelect, runIndexSelect, indexSelectRows});
  registry.add({"slice_scatter", 2, "dim, start, end, step", inferSliceScatter, runSliceScatter, sliceRows});
  registry.add({"index_copy", 3, "dim", inferIndexCopy, runIndexCopy, indexCopyRows});
  registry.add({"repeat", 1, "ndim, repeats...", inferRepeat, runRepeat, repeatRows});
  registry.add({"pad", 1, "nPads, pads..., value", inferPad, runPad, padRows});
}

}  // namespace dtorch::core
