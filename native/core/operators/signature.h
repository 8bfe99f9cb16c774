// Placement signatures: for each op, the rows of input placements it accepts on one mesh dim
// and the output placement each gives (DTensor's op strategies, as data). A family writes
// its rows once, for one mesh dim, from the input metas; the matcher applies them to every
// dim of an N-D mesh. All-Replicate -> Replicate is implied and need not be listed.
#pragma once
#include <c10/util/SmallVector.h>

#include <string>
#include <vector>

#include "core/operand/meta.h"

namespace dtorch::core {

struct InferContext;

struct SignatureRow {
  c10::SmallVector<Placement, 3> inputs;
  Placement output;
  // Bit k: input k may also come as Replicate; it is then sliced locally (no communication)
  // to inputs[k] before the op runs. The documented auto-redistribute of broadcast ops.
  unsigned localSliceMask = 0;
};
using SignatureRows = std::vector<SignatureRow>;
using RowsFn = void (*)(const InferContext&, SignatureRows&);

struct SignatureMatch {
  Placements output;                          // one per mesh dim
  c10::SmallVector<Placements, 3> sliceTo;    // per input: placements to slice to first, or empty
};

// Matches the inputs' placements, mesh dim by mesh dim; throws PLACEMENT_MISMATCH naming the
// op, every input's placements, the legal rows and the redistribute call that fixes it.
SignatureMatch matchSignature(const InferContext& ctx, RowsFn rows);

std::string formatRow(const SignatureRow& row);

// Row helpers shared by the families.
SignatureRow row(c10::ArrayRef<Placement> inputs, Placement output, unsigned localSliceMask = 0);

// Rows of broadcasting inputs (right-aligned against `out`, whose dim o is written S(o + offset)):
// an output dim can be sharded when every input that has it at full size is sharded on it
// (or Replicate, sliced locally) and the inputs that broadcast along it stay Replicate.
void broadcastRows(c10::ArrayRef<const Shape*> inputs, const Shape& out, int32_t offset, SignatureRows& rows);

}  // namespace dtorch::core
