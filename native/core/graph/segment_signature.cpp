#include "core/graph/segment_signature.h"

#include <cstring>
#include <unordered_map>

#include "core/operators/registry.h"

namespace dtorch::core {

namespace {

class Words {
 public:
  explicit Words(std::vector<uint64_t>& out) : out_(out) {}
  void add(uint64_t w) {
    out_.push_back(w);
    hash_ = (hash_ ^ w) * 0x100000001b3ull;  // FNV-1a over words
  }
  void addDouble(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    add(bits);
  }
  uint64_t hash() const { return hash_; }

 private:
  std::vector<uint64_t>& out_;
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

}  // namespace

SegmentSignature signatureOf(const Segment& segment) {
  SegmentSignature sig;
  sig.words.reserve(segment.nodes.size() * 8);
  Words w(sig.words);
  // an id's role: made here (node index and output slot) or from outside (order of first use)
  std::unordered_map<int64_t, uint64_t> roles;
  roles.reserve(segment.nodes.size() * 2);
  uint64_t outside = 0;
  auto role = [&](int64_t id) -> uint64_t {
    auto [it, fresh] = roles.try_emplace(id, 0);
    if (fresh) it->second = (uint64_t{1} << 63) | outside++;
    return it->second;
  };
  const OpRegistry& registry = OpRegistry::instance();
  for (size_t i = 0; i < segment.nodes.size(); ++i) {
    const Node& node = segment.nodes[i];
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
          roles[node.outputs[k]] = (static_cast<uint64_t>(i) << 16) | k;
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
  sig.hash = w.hash();
  return sig;
}

}  // namespace dtorch::core
