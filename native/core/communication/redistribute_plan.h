// Planning a redistribute on one mesh: a list of steps, each changing the placement of one
// mesh dim. Mesh dims that shard the same tensor dim nest (the earlier splits first), so:
//   1. last mesh dim to first: take apart what the target does not keep, with one collective
//      where one does it (P->S reduce-scatter, S(i)->S(j) all-to-all, S->R all-gather,
//      P->R all-reduce), first gathering later mesh dims that nest inside the tensor dims
//      involved; through Replicate where it would nest inside an earlier dim still to change;
//   2. first mesh dim to last: build what the target adds, locally (R->S slice, R->P).
// This moves no more bytes than the per-dim collectives themselves need in the common cases.
#pragma once
#include <string>
#include <vector>

#include "core/operand/mesh.h"
#include "core/operand/meta.h"

namespace dtorch::core {

struct RedistributeStep {
  enum class Kind {
    kAllGather,      // S(from) -> R
    kAllReduce,      // P(op) -> R
    kReduceScatter,  // P(op) -> S(to)
    kAllToAll,       // S(from) -> S(to)
    kLocalSlice,     // R -> S(to), no communication
    kLocalPartial,   // R -> P(op): P(sum) keeps the value at coordinate 0 and zeros elsewhere
    kLocalPad,       // S(from) -> P(sum): each rank puts its piece into zeros, no communication
  };
  Kind kind;
  int meshDim;
  int32_t from = -1;  // tensor dim sharded before the step
  int32_t to = -1;    // tensor dim sharded after the step
  ReduceOp reduce = ReduceOp::kSum;
  Placements before;  // placements of the whole tensor before this step

  bool isCollective() const { return kind <= Kind::kAllToAll; }
  std::string describe() const;
};

std::vector<RedistributeStep> planRedistribute(const DeviceMesh& mesh, const Placements& from, const Placements& to);

}  // namespace dtorch::core
