#include "core/operators/signature.h"

#include "common/error.h"
#include "core/operand/mesh_table.h"
#include "core/operators/op.h"

namespace dtorch::core {

SignatureRow row(c10::ArrayRef<Placement> inputs, Placement output, unsigned localSliceMask) {
  SignatureRow r;
  r.inputs.assign(inputs.begin(), inputs.end());
  r.output = output;
  r.localSliceMask = localSliceMask;
  return r;
}

void broadcastRows(c10::ArrayRef<const Shape*> inputs, const Shape& out, int32_t offset, SignatureRows& rows) {
  const int64_t n = static_cast<int64_t>(out.size());
  for (int64_t o = 0; o < n; ++o) {
    SignatureRow r;
    r.output = Placement::shard(static_cast<int32_t>(o + offset));
    bool anyFull = false;
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Shape& s = *inputs[k];
      const int64_t i = o - (n - static_cast<int64_t>(s.size()));
      const bool full = i >= 0 && s[i] == out[o];
      r.inputs.push_back(full ? Placement::shard(static_cast<int32_t>(i)) : Placement::replicate());
      if (full) r.localSliceMask |= 1u << k;
      anyFull = anyFull || full;
    }
    if (anyFull) rows.push_back(std::move(r));
  }
}

std::string formatRow(const SignatureRow& row) {
  std::string out = "(";
  for (size_t k = 0; k < row.inputs.size(); ++k) {
    if (k) out += ", ";
    out += row.inputs[k].shortName();
    if (row.localSliceMask & (1u << k)) out += "|R";
  }
  return out + ") -> " + row.output.shortName();
}

namespace {

enum class Fit { kNo, kExact, kWithSlice };

Fit fits(const SignatureRow& row, c10::ArrayRef<Placement> got) {
  Fit fit = Fit::kExact;
  for (size_t k = 0; k < got.size(); ++k) {
    if (got[k] == row.inputs[k]) continue;
    if (got[k].isReplicate() && row.inputs[k].isShard() && (row.localSliceMask & (1u << k))) {
      fit = Fit::kWithSlice;
      continue;
    }
    return Fit::kNo;
  }
  return fit;
}

[[noreturn]] void noRow(const InferContext& ctx, const SignatureRows& rows, int meshDim,
                        c10::ArrayRef<Placement> got) {
  const DeviceMesh& mesh = ctx.meshes.get(ctx.inputs[0]->meshId);
  std::string inputs;
  for (size_t k = 0; k < ctx.inputs.size(); ++k) {
    inputs += (k ? ", " : "") + formatPlacements(ctx.inputs[k]->placements);
  }
  std::string legal;
  for (const SignatureRow& r : rows) legal += "\n    " + formatRow(r);
  legal += "\n    (R, ...) -> R";
  // The fix: the row that needs the fewest inputs changed, as redistribute calls.
  const SignatureRow* best = nullptr;
  size_t bestChanges = SIZE_MAX;
  for (const SignatureRow& r : rows) {
    size_t changes = 0;
    for (size_t k = 0; k < got.size(); ++k) {
      const bool ok = got[k] == r.inputs[k] || (got[k].isReplicate() && (r.localSliceMask & (1u << k)));
      changes += !ok;
    }
    if (changes < bestChanges) best = &r, bestChanges = changes;
  }
  std::string fix;
  for (size_t k = 0; k < got.size(); ++k) {
    Placements target = ctx.inputs[k]->placements;
    target[meshDim] = best && !(got[k] == best->inputs[k]) ? best->inputs[k] : got[k];
    if (!best) target[meshDim] = Placement::replicate();
    if (target[meshDim] == got[k]) continue;
    fix += (fix.empty() ? "" : "; ") + std::string("input #") + std::to_string(k) + ".redistribute(mesh, " +
           formatPlacements(target) + ")";
  }
  ctx.fail(common::code::kPlacementMismatch,
           "inputs with placements " + inputs + " match no signature row on mesh dim " + std::to_string(meshDim) +
               " (size " + std::to_string(mesh.shape[meshDim]) + "). Legal rows on one mesh dim (|R: Replicate " +
               "accepted, sliced locally):" + legal + "\n  Fix: " + fix);
}

}  // namespace

SignatureMatch matchSignature(const InferContext& ctx, RowsFn rowsFn) {
  const DeviceMesh& mesh = ctx.meshes.get(ctx.inputs[0]->meshId);
  SignatureMatch match;
  match.sliceTo.resize(ctx.inputs.size());
  SignatureRows rows;
  bool rowsBuilt = false;
  c10::SmallVector<Placement, 3> got(ctx.inputs.size());
  for (int d = 0; d < mesh.ndim(); ++d) {
    bool allReplicate = true;
    for (size_t k = 0; k < ctx.inputs.size(); ++k) {
      got[k] = ctx.inputs[k]->placements[d];
      allReplicate = allReplicate && got[k].isReplicate();
    }
    if (allReplicate) {
      match.output.push_back(Placement::replicate());
      continue;
    }
    if (!rowsBuilt) {
      if (rowsFn) rowsFn(ctx, rows);
      rowsBuilt = true;
    }
    const SignatureRow* chosen = nullptr;
    for (const SignatureRow& r : rows) {  // an exact row wins over one that needs a slice
      const Fit fit = fits(r, got);
      if (fit == Fit::kExact) {
        chosen = &r;
        break;
      }
      if (fit == Fit::kWithSlice && !chosen) chosen = &r;
    }
    if (!chosen) noRow(ctx, rows, d, got);
    match.output.push_back(chosen->output);
    for (size_t k = 0; k < got.size(); ++k) {
      if (got[k] == chosen->inputs[k]) continue;
      if (match.sliceTo[k].empty()) match.sliceTo[k] = ctx.inputs[k]->placements;
      match.sliceTo[k][d] = chosen->inputs[k];
    }
  }
  return match;
}

}  // namespace dtorch::core
