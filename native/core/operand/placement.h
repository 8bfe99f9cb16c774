// Placement of a tensor along one mesh dimension: Shard(dim), Replicate(), Partial(op).
// A value type; it crosses the binding as one number (see encode/decode).
#pragma once
#include <cstdint>
#include <string>

namespace dtorch::core {

enum class ReduceOp : int8_t { kSum, kAvg, kMax, kMin };

struct Placement {
  enum class Kind : int8_t { kReplicate, kShard, kPartial };
  Kind kind = Kind::kReplicate;
  int32_t dim = 0;               // tensor dim, for kShard
  ReduceOp reduce = ReduceOp::kSum;  // for kPartial

  static Placement replicate() { return {}; }
  static Placement shard(int32_t dim) { return {Kind::kShard, dim, ReduceOp::kSum}; }
  static Placement partial(ReduceOp op = ReduceOp::kSum) { return {Kind::kPartial, 0, op}; }

  bool isReplicate() const { return kind == Kind::kReplicate; }
  bool isShard() const { return kind == Kind::kShard; }
  bool isPartial() const { return kind == Kind::kPartial; }
  bool operator==(const Placement& o) const {
    return kind == o.kind && (kind != Kind::kShard || dim == o.dim) && (kind != Kind::kPartial || reduce == o.reduce);
  }

  // Wire form shared with TypeScript: Shard(d) -> d >= 0, Replicate -> -1, Partial(sum/avg/max/min) -> -2..-5.
  int32_t encode() const;
  static Placement decode(int32_t code);
  // Short form, as in error messages: S(0), R, P(sum).
  std::string shortName() const;
};

}  // namespace dtorch::core
