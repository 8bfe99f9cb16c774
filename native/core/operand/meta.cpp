#include "core/operand/meta.h"

#include "common/format.h"

namespace dtorch::core {

std::string formatShape(const Shape& shape) { return common::formatList(shape); }

std::string formatPlacements(const Placements& placements) {
  std::string out = "[";
  for (size_t i = 0; i < placements.size(); ++i) {
    if (i) out += ", ";
    out += placements[i].shortName();
  }
  return out + "]";
}

}  // namespace dtorch::core
