#include "core/operand/placement.h"

#include "common/error.h"

namespace dtorch::core {

int32_t Placement::encode() const {
  switch (kind) {
    case Kind::kShard: return dim;
    case Kind::kReplicate: return -1;
    case Kind::kPartial: return -2 - static_cast<int32_t>(reduce);
  }
  return -1;
}

Placement Placement::decode(int32_t code) {
  if (code >= 0) return shard(code);
  if (code == -1) return replicate();
  if (code >= -5) return partial(static_cast<ReduceOp>(-2 - code));
  common::fail(common::code::kInvalidArgument, "unknown placement code " + std::to_string(code));
}

std::string Placement::shortName() const {
  switch (kind) {
    case Kind::kShard: return "S(" + std::to_string(dim) + ")";
    case Kind::kReplicate: return "R";
    case Kind::kPartial: {
      static const char* names[] = {"sum", "avg", "max", "min"};
      return std::string("P(") + names[static_cast<int>(reduce)] + ")";
    }
  }
  return "?";
}

}  // namespace dtorch::core
