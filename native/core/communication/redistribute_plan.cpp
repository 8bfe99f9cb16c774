#include "core/communication/redistribute_plan.h"

#include "common/error.h"

namespace dtorch::core {

std::string RedistributeStep::describe() const {
  static const char* names[] = {"all-gather", "all-reduce", "reduce-scatter", "all-to-all",
                                "local slice", "local partial", "local pad"};
  Placement after = before[meshDim];
  switch (kind) {
    case Kind::kAllGather:
    case Kind::kAllReduce: after = Placement::replicate(); break;
    case Kind::kReduceScatter:
    case Kind::kAllToAll:
    case Kind::kLocalSlice: after = Placement::shard(to); break;
    case Kind::kLocalPartial: after = Placement::partial(reduce); break;
    case Kind::kLocalPad: after = Placement::partial(ReduceOp::kSum); break;
  }
  return std::string(names[static_cast<int>(kind)]) + " " + before[meshDim].shortName() + "->" + after.shortName() +
         " on mesh dim " + std::to_string(meshDim);
}

namespace {

using Kind = RedistributeStep::Kind;

class Planner {
 public:
  Planner(const DeviceMesh& mesh, Placements from, const Placements& to) : mesh_(mesh), cur_(std::move(from)), to_(to) {}

  std::vector<RedistributeStep> run() {
    const int n = mesh_.ndim();
    for (int d = n - 1; d >= 0; --d) {  // 1: take apart
      if (cur_[d] == to_[d] || cur_[d].isReplicate()) continue;
      if (!direct(d)) toReplicate(d);
    }
    for (int d = 0; d < n; ++d) {  // 2: build up
      if (cur_[d] == to_[d]) continue;
      if (!cur_[d].isReplicate()) toReplicate(d);
      const Placement& target = to_[d];
      if (target.isShard()) {
        ungatherInner(d, target.dim);
        emit(Kind::kLocalSlice, d, -1, target.dim, ReduceOp::kSum);
      } else if (target.isPartial()) {
        emit(Kind::kLocalPartial, d, -1, -1, target.reduce);
      }
    }
    for (int d = 0; d < n; ++d) {
      if (!(cur_[d] == to_[d])) common::fail(common::code::kInternal, "redistribute planner did not reach its target");
    }
    return std::move(steps_);
  }

 private:
  // Sharding `dim` at `d` now leaves no earlier mesh dim to shard it later (nesting order).
  bool noOuterSplitPending(int d, int32_t dim) const {
    for (int earlier = 0; earlier < d; ++earlier) {
      if (to_[earlier].isShard() && to_[earlier].dim == dim && !(cur_[earlier] == to_[earlier])) return false;
    }
    return true;
  }

  // An earlier mesh dim still holds S(dim) and must change: splitting `dim` at `d` now would
  // nest inside it and stop it from being taken apart directly.
  bool blocksEarlier(int d, int32_t dim) const {
    for (int earlier = 0; earlier < d; ++earlier) {
      if (cur_[earlier].isShard() && cur_[earlier].dim == dim && !(cur_[earlier] == to_[earlier])) return true;
    }
    return false;
  }

  // One collective (or local pad) from cur_[d] to to_[d], after gathering whatever later mesh
  // dims nest inside the tensor dims involved; false when it must go through Replicate.
  bool direct(int d) {
    const Placement x = cur_[d], t = to_[d];
    if (t.isShard() && (!noOuterSplitPending(d, t.dim) || blocksEarlier(d, t.dim))) return false;
    Kind kind;
    if (x.isPartial() && t.isReplicate()) kind = Kind::kAllReduce;
    else if (x.isPartial() && t.isShard()) kind = Kind::kReduceScatter;
    else if (x.isShard() && t.isReplicate()) kind = Kind::kAllGather;
    else if (x.isShard() && t.isShard()) kind = Kind::kAllToAll;
    else if (x.isShard() && t.isPartial() && t.reduce == ReduceOp::kSum) kind = Kind::kLocalPad;
    else return false;  // P(a) -> P(b), S -> P(avg/max/min): through Replicate
    if (x.isShard()) ungatherInner(d, x.dim);
    if (t.isShard()) ungatherInner(d, t.dim);
    return emit(kind, d, x.isShard() ? x.dim : -1, t.isShard() ? t.dim : -1, x.isPartial() ? x.reduce : ReduceOp::kSum);
  }

  // Makes cur_[d] Replicate, first gathering any later mesh dims nested inside it.
  void toReplicate(int d) {
    const Placement x = cur_[d];
    if (x.isShard()) {
      ungatherInner(d, x.dim);
      emit(Kind::kAllGather, d, x.dim, -1, ReduceOp::kSum);
    } else if (x.isPartial()) {
      emit(Kind::kAllReduce, d, -1, -1, x.reduce);
    }
  }

  // Gathers (innermost first) every mesh dim after `d` that splits tensor dim `dim`.
  void ungatherInner(int d, int32_t dim) {
    for (int later = mesh_.ndim() - 1; later > d; --later) {
      if (cur_[later].isShard() && cur_[later].dim == dim) toReplicate(later);
    }
  }

  bool emit(Kind kind, int d, int32_t from, int32_t to, ReduceOp reduce) {
    steps_.push_back({kind, d, from, to, reduce, cur_});
    switch (kind) {
      case Kind::kAllGather:
      case Kind::kAllReduce: cur_[d] = Placement::replicate(); break;
      case Kind::kReduceScatter:
      case Kind::kAllToAll:
      case Kind::kLocalSlice: cur_[d] = Placement::shard(to); break;
      case Kind::kLocalPartial: cur_[d] = Placement::partial(reduce); break;
      case Kind::kLocalPad: cur_[d] = Placement::partial(ReduceOp::kSum); break;
    }
    return true;
  }

  const DeviceMesh& mesh_;
  Placements cur_;
  const Placements& to_;
  std::vector<RedistributeStep> steps_;
};

}  // namespace

std::vector<RedistributeStep> planRedistribute(const DeviceMesh& mesh, const Placements& from, const Placements& to) {
  return Planner(mesh, from, to).run();
}

}  // namespace dtorch::core
