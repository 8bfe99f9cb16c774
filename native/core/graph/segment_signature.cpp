#include "core/graph/segment_signature.h"

#include <cstring>

#include "common/word_hash.h"
#include "core/operators/registry.h"

namespace dtorch::core {

namespace {

// Two hashes of a stream of words: FNV-1a, and a multiply-rotate mix with other constants.
class Words {
 public:
  void add(uint64_t w) {
    hash_.add(w);
    check_ = (((check_ ^ w) * 0x9e3779b97f4a7c15ull) << 31 | ((check_ ^ w) * 0x9e3779b97f4a7c15ull) >> 33) + 0x632be59bd9b4e019ull;
  }
  void addDouble(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    add(bits);
  }
  uint64_t hash() const { return hash_.value(); }
  uint64_t check() const { return check_; }

 private:
  common::WordHash hash_;
  uint64_t check_ = 0x2545f4914f6cdd1dull;
};

}  // namespace

SegmentSignature signatureOf(const Segment& segment, SignatureScratch& scratch) {
  Words w;
  // an id's role: made here (node index and output slot) or from outside (order of first use)
  common::IdMap<uint64_t>& roles = scratch.roles;
  roles.clear();
  uint64_t outside = 0;
  auto role = [&](int64_t id) -> uint64_t {
    if (const uint64_t* known = roles.find(id)) return *known;
    return roles.put(id, (uint64_t{1} << 63) | outside++);
  };
  const OpRegistry& registry = OpRegistry::instance();
  for (size_t i = 0; i < segment.nodes.size(); ++i) {
    const Node& node = segment.nodes[i];
    // a tensor from outside let go of here (a dispose, or the garbage collector's release at any
    // moment) changes nothing the segment computes
    if (node.kind == NodeKind::kRelease && !roles.contains(node.outputs[0])) continue;
    w.add(static_cast<uint64_t>(node.kind));
    switch (node.kind) {
      case NodeKind::kCompute: {
        w.add(static_cast<uint64_t>(registry.codeOf(*node.op)));
        w.add((static_cast<uint64_t>(node.meshId) << 32) | static_cast<uint32_t>(node.inputMeshId));
        w.add(node.inputs.size());
        for (int64_t id : node.inputs) w.add(role(id));
        w.add(node.attrs.size());
        for (double a : node.attrs) w.addDouble(a);
        w.add(node.outputMetas.size());
        for (size_t k = 0; k < node.outputMetas.size(); ++k) {
          const TensorMeta& m = node.outputMetas[k];
          w.add((static_cast<uint64_t>(m.dtype) << 32) | static_cast<uint32_t>(m.meshId));
          w.add(m.shape.size());
          for (int64_t s : m.shape) w.add(static_cast<uint64_t>(s));
          for (const Placement& p : m.placements) w.add(static_cast<uint32_t>(p.encode()));
          roles.put(node.outputs[k], (static_cast<uint64_t>(i) << 16) | k);
        }
        w.add(node.hostData.defined() ? static_cast<uint64_t>(node.hostData.scalar_type()) + 1 : 0);
        break;
      }
      case NodeKind::kRelease:
      case NodeKind::kFetch:
        w.add(static_cast<uint64_t>(node.meshId));
        w.add(role(node.kind == NodeKind::kRelease ? node.outputs[0] : node.inputs[0]));
        break;
      case NodeKind::kSync: break;
    }
  }
  return {w.hash(), w.check(), segment.nodes.size()};
}

}  // namespace dtorch::core
