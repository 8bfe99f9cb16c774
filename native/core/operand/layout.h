// Layout: where the pieces of a distributed tensor live. Shards follow torch.chunk sizes
// (11 over 4 -> 3,3,3,2; 2 over 4 -> 1,1,0,0); mesh dims that shard the same tensor dim nest
// in mesh-dim order (the first splits the full dim, the next splits that piece, ...).
#pragma once
#include <cstdint>
#include <vector>

#include "core/operand/mesh.h"
#include "core/operand/meta.h"

namespace dtorch::core {

// Size and offset of piece `index` when `size` is chunked into `parts` as torch.chunk does.
int64_t chunkSize(int64_t size, int64_t parts, int64_t index);
int64_t chunkOffset(int64_t size, int64_t parts, int64_t index);

// `sizes` with dim `dim` set to `size` (a piece's shape, a padded buffer's shape).
inline std::vector<int64_t> withSize(c10::ArrayRef<int64_t> sizes, int64_t dim, int64_t size) {
  std::vector<int64_t> out(sizes.begin(), sizes.end());
  out[static_cast<size_t>(dim)] = size;
  return out;
}

// Coordinates of `rank` on each mesh dim (row-major).
std::vector<int64_t> meshCoords(const DeviceMesh& mesh, int rank);

// The rank's piece: its shape and its offset in the full tensor, per tensor dim.
struct LocalPiece {
  Shape shape;
  Shape offset;
};
LocalPiece localPiece(const Shape& shape, const Placements& placements, const DeviceMesh& mesh, int rank);
inline Shape localShape(const TensorMeta& meta, const DeviceMesh& mesh, int rank) {
  return localPiece(meta.shape, meta.placements, mesh, rank).shape;
}

// Ranks that differ from `rank` only along mesh dim `dim`, in coordinate order: the group a
// collective over that mesh dim runs in. `position` gets rank's index in the group.
std::vector<int> groupAlong(const DeviceMesh& mesh, int rank, int dim, int* position = nullptr);
// Which group (0 .. size/shape[dim]-1) `rank` belongs to along `dim`.
int groupIndexAlong(const DeviceMesh& mesh, int rank, int dim);

}  // namespace dtorch::core
