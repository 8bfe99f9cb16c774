// SegmentSignature: what makes two recorded segments the same program, so that the controller
// can recognise one it has seen before (and, next, replay its lowering; on GPUs as a CUDA
// graph). Two segments match when their nodes have the same kinds, ops, attributes, meshes and
// output metas (shape, dtype, placements) in the same order, and every node reads its inputs in
// the same roles: a tensor made earlier in the segment by the same node and output, or one from
// outside it in the same order of first use. Tensor ids and host data values do not count: they
// are the segment's inputs. The words are compared whole, the hash only picks the bucket.
#pragma once
#include <cstdint>
#include <vector>

#include "core/graph/segment.h"

namespace dtorch::core {

struct SegmentSignature {
  uint64_t hash = 0;
  std::vector<uint64_t> words;
  bool operator==(const SegmentSignature& o) const { return hash == o.hash && words == o.words; }
};

SegmentSignature signatureOf(const Segment& segment);

}  // namespace dtorch::core
