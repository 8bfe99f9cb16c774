// Segment: a run of recorded nodes handed from the client to the controller in one piece.
#pragma once
#include <vector>

#include "core/program/node.h"

namespace dtorch::core {

struct Segment {
  std::vector<Node> nodes;
};

}  // namespace dtorch::core
