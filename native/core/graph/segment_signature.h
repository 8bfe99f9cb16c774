// SegmentSignature: what makes two recorded segments the same program, so that the controller
// can recognise one it has seen before (and, next, replay its lowering; on GPUs as a CUDA
// graph). Two segments match when their nodes have the same kinds, ops, attributes, meshes and
// output metas (shape, dtype, placements) in the same order, and every node reads its inputs in
// the same roles: a tensor made earlier in the segment by the same node and output, or one from
// outside it in the same order of first use. Tensor ids and host data values do not count: they
// are the segment's inputs; nor do releases of tensors from outside (the garbage collector's
// releases land in whatever segment is open). Two independent 64-bit hashes of those words stand for them (the
// words themselves are not kept: a false match of both is about 2^-128 likely).
#pragma once
#include <cstdint>

#include "common/id_map.h"
#include "core/program/segment.h"

namespace dtorch::core {

struct SegmentSignature {
  uint64_t hash = 0;    // FNV-1a of the words: picks the bucket
  uint64_t check = 0;   // another mix of the same words
  uint64_t nodes = 0;
  bool operator==(const SegmentSignature& o) const { return hash == o.hash && check == o.check && nodes == o.nodes; }
};

// Reused from segment to segment, so that signing one allocates nothing once warm.
struct SignatureScratch {
  common::IdMap<uint64_t> roles{64};  // grows to the largest segment's ids
};

SegmentSignature signatureOf(const Segment& segment, SignatureScratch& scratch);

}  // namespace dtorch::core
