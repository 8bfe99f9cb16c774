#include "core/operand/layout.h"

#include <algorithm>

namespace dtorch::core {

int64_t chunkSize(int64_t size, int64_t parts, int64_t index) {
  const int64_t each = (size + parts - 1) / parts;  // torch.chunk: ceil, the last pieces may be short or empty
  return std::clamp<int64_t>(size - each * index, 0, each);
}

int64_t chunkOffset(int64_t size, int64_t parts, int64_t index) {
  const int64_t each = (size + parts - 1) / parts;
  return std::min(size, each * index);
}

std::vector<int64_t> meshCoords(const DeviceMesh& mesh, int rank) {
  std::vector<int64_t> coords(mesh.shape.size());
  int64_t rest = rank;
  for (int d = mesh.ndim() - 1; d >= 0; --d) {
    coords[d] = rest % mesh.shape[d];
    rest /= mesh.shape[d];
  }
  return coords;
}

LocalPiece localPiece(const Shape& shape, const Placements& placements, const DeviceMesh& mesh, int rank) {
  LocalPiece piece{shape, Shape(shape.size(), 0)};
  if (!anyShard(placements)) return piece;  // the common case: every rank holds the full shape
  const std::vector<int64_t> coords = meshCoords(mesh, rank);
  for (size_t d = 0; d < placements.size(); ++d) {
    const Placement& p = placements[d];
    if (!p.isShard()) continue;
    const int64_t parts = mesh.shape[d];
    int64_t& size = piece.shape[p.dim];
    piece.offset[p.dim] += chunkOffset(size, parts, coords[d]);
    size = chunkSize(size, parts, coords[d]);
  }
  return piece;
}

std::vector<int> groupAlong(const DeviceMesh& mesh, int rank, int dim, int* position) {
  std::vector<int64_t> coords = meshCoords(mesh, rank);
  int64_t stride = 1;
  for (int d = mesh.ndim() - 1; d > dim; --d) stride *= mesh.shape[d];
  const int first = rank - static_cast<int>(coords[dim] * stride);
  std::vector<int> group;
  for (int64_t c = 0; c < mesh.shape[dim]; ++c) group.push_back(first + static_cast<int>(c * stride));
  if (position) *position = static_cast<int>(coords[dim]);
  return group;
}

int groupIndexAlong(const DeviceMesh& mesh, int rank, int dim) {
  // the rank with coordinate 0 on `dim` names the group; number groups in rank order
  std::vector<int64_t> coords = meshCoords(mesh, rank);
  int index = 0;
  for (int d = 0; d < mesh.ndim(); ++d) {
    if (d == dim) continue;
    index = index * static_cast<int>(mesh.shape[d]) + static_cast<int>(coords[d]);
  }
  return index;
}

}  // namespace dtorch::core
