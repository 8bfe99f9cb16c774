#include "core/runner/fusion.h"

#include "common/env.h"
#include "common/id_map.h"
#include "core/operators/infer_util.h"
#include "core/operators/registry.h"

namespace dtorch::core {

namespace {

// Whose attributes a fused node keeps.
enum class KeptAttrs { kNone, kProducer, kConsumer, kBoth };  // kBoth: the producer's, then the consumer's

// One fusable pair: `producer`'s output read by `consumer` becomes `fused`, whose inputs
// `inputsOf` lists. `slot` says which consumer input reads the producer's output t (-1: the pair
// does not qualify, e.g. an attribute the fused kernel does not cover). The fused node has no
// attributes, the producer's or the consumer's (attrs).
struct Rule {
  const char* producer;
  const char* consumer;
  const char* fused;
  int (*slot)(const Node& producer, const Node& consumer, int64_t t);
  c10::SmallVector<int64_t, 4> (*inputsOf)(const Node& producer, const Node& consumer, int slot);
  KeptAttrs attrs = KeptAttrs::kNone;
  bool loraJoin = false;  // DTORCH_LORA_JOIN=0 turns the rule off (to compare: bench/hf/lora.mjs VARIANTS)
};

// Which input of an add (alpha 1, two distinct inputs) is the producer's output t.
int addendSlot(const Node&, const Node& c, int64_t t) {
  if (c.attrs[0] != 1 || c.inputs[0] == c.inputs[1]) return -1;
  return c.inputs[0] == t ? 0 : c.inputs[1] == t ? 1 : -1;
}

// The fused inputs of an add's rules: its other addend, then the producer's two inputs.
c10::SmallVector<int64_t, 4> addendThenProducer(const Node& p, const Node& c, int slot) {
  return {c.inputs[1 - slot], p.inputs[0], p.inputs[1]};
}

const Rule kRules[] = {
    // linear(x, W, b) -> gelu(tanh): the matmul's GELU epilogue (cuBLASLt) on GPUs
    {"linear", "gelu", "linear_gelu",
     [](const Node& p, const Node& c, int64_t t) { return p.inputs.size() == 3 && c.attrs[0] == 1 && c.inputs[0] == t ? 0 : -1; },
     [](const Node& p, const Node&, int) { return p.inputs; }},
    // mul(a, b) -> add(c, ·) or add(·, c) with alpha 1: addcmul(c, a, b), one pass on GPUs
    {"mul", "add", "addcmul", addendSlot, addendThenProducer},
    // linear(x, W) -> add(c, ·) or add(·, c) with alpha 1: linear_add(c, x, W), the matmul
    // accumulating into c on GPUs (the residual or partial-product sum of a transformer block)
    {"linear", "add", "linear_add",
     [](const Node& p, const Node& c, int64_t t) { return p.inputs.size() == 2 ? addendSlot(p, c, t) : -1; }, addendThenProducer},
    // layer_norm(x) -> addcmul(c, ·, b) (formed just above from mul -> add): layer_norm_addcmul
    // (c, x, b, the norm's weight and bias), adaLN's modulated norm in one pass on GPUs
    {"layer_norm", "addcmul", "layer_norm_addcmul",
     [](const Node&, const Node& c, int64_t t) { return c.inputs[1] == t && c.inputs[2] != t ? 1 : c.inputs[2] == t && c.inputs[1] != t ? 2 : -1; },
     [](const Node& p, const Node& c, int slot) {
       c10::SmallVector<int64_t, 4> in{c.inputs[0], p.inputs[0], c.inputs[3 - slot]};
       in.append(p.inputs.begin() + 1, p.inputs.end());
       return in;
     },
     KeptAttrs::kProducer},
    // add(s, 1) (a scalar 1, alpha 1) -> layer_norm_addcmul(c, x, ·): layer_norm_modulate(c, x, s,
    // ...), adaLN's norm(x) · (1 + scale) + shift whole in one pass on GPUs (formed just above)
    {"add_scalar", "layer_norm_addcmul", "layer_norm_modulate",
     [](const Node& p, const Node& c, int64_t t) {
       const bool plusOne = p.attrs[0] == 1 && static_cast<ScalarKind>(p.attrs[1]) != ScalarKind::kBool && p.attrs[2] == 1;
       return plusOne && c.inputs[2] == t ? 2 : -1;
     },
     [](const Node& p, const Node& c, int) {
       c10::SmallVector<int64_t, 4> in(c.inputs.begin(), c.inputs.end());
       in[2] = p.inputs[0];
       return in;
     },
     KeptAttrs::kConsumer},
    // gelu(h, tanh) -> fp8_linear(·, W, scale, bias?) quantizing its input's own rows:
    // gelu_fp8_linear(h, W, scale, bias?), the row kernel applying the GELU as it quantizes on GPUs
    // (an MLP's hidden layer into its FP8 output linear; the consumer's attributes stand)
    {"gelu", "fp8_linear", "gelu_fp8_linear",
     [](const Node& p, const Node& c, int64_t t) { return p.attrs[0] == 1 && c.attrs[1] == 0 && c.inputs[0] == t && c.inputs[1] != t ? 0 : -1; },
     [](const Node& p, const Node& c, int) {
       c10::SmallVector<int64_t, 4> in(c.inputs.begin(), c.inputs.end());
       in[0] = p.inputs[0];
       return in;
     },
     KeptAttrs::kConsumer},
    // layer_norm_modulate(c, x, s, ...) (formed above) -> fp8_linear(·, W, scale, bias?)
    // quantizing its input's own rows: layer_norm_modulate_fp8_linear(c, x, s, ..., W, scale,
    // bias?), the norm's row kernel writing the FP8 rows and their scales on GPUs (adaLN's norm
    // into the FP8 linear after it; the norm's attributes, then the linear's)
    {"layer_norm_modulate", "fp8_linear", "layer_norm_modulate_fp8_linear",
     [](const Node&, const Node& c, int64_t t) { return c.attrs[1] == 0 && c.inputs[0] == t && c.inputs[1] != t ? 0 : -1; },
     [](const Node& p, const Node& c, int) {
       c10::SmallVector<int64_t, 4> in(p.inputs.begin(), p.inputs.end());
       in.append(c.inputs.begin() + 1, c.inputs.end());
       return in;
     },
     KeptAttrs::kBoth},
    // rms_norm(x, weight?) -> rotary_emb(·, cos, sin): rms_norm_rotary_emb(x, weight?, cos, sin),
    // per-head q/k norms and the rotary after them in one row kernel on GPUs (the norm's
    // attributes, then the rotary's)
    {"rms_norm", "rotary_emb", "rms_norm_rotary_emb",
     [](const Node&, const Node& c, int64_t t) { return c.inputs[0] == t && c.inputs[1] != t && c.inputs[2] != t ? 0 : -1; },
     [](const Node& p, const Node& c, int) {
       c10::SmallVector<int64_t, 4> in(p.inputs.begin(), p.inputs.end());
       in.append(c.inputs.begin() + 1, c.inputs.end());
       return in;
     },
     KeptAttrs::kBoth},
    // group_norm(x, weight?, bias?) -> silu(·): group_norm_silu(x, weight?, bias?), a VAE resnet
    // block's norm and activation in one pass of the norm's kernel on GPUs (the norm's attributes)
    {"group_norm", "silu", "group_norm_silu", [](const Node&, const Node& c, int64_t t) { return c.inputs[0] == t ? 0 : -1; },
     [](const Node& p, const Node&, int) { return p.inputs; }, KeptAttrs::kProducer},
    // linear(x, A) (bias-free) -> cat([x, ·], last dim): lora_join(x, A), an unfused LoRA
    // adapter's [x | A x] with A x written in place (@dtorch/nn loraWideProduct)
    {"linear", "cat", "lora_join",
     [](const Node& p, const Node& c, int64_t t) {
       if (p.inputs.size() != 2 || c.inputs.size() != 2 || c.inputs[1] != t || c.inputs[0] != p.inputs[0] || c.outputMetas.empty()) return -1;
       const auto dim = static_cast<int64_t>(c.attrs[0]), ndim = static_cast<int64_t>(c.outputMetas[0].shape.size());
       return dim == -1 || dim == ndim - 1 ? 1 : -1;
     },
     [](const Node& p, const Node&, int) { return p.inputs; }, KeptAttrs::kNone, /*loraJoin=*/true},
    // layer_norm_modulate(c, x, s, ...) -> lora_join(·, A): layer_norm_modulate_join(c, x, s, ...,
    // A), the norm's rows written into the joined buffer on GPUs (formed just above)
    {"layer_norm_modulate", "lora_join", "layer_norm_modulate_join",
     [](const Node&, const Node& c, int64_t t) { return c.inputs[0] == t && c.inputs[1] != t ? 0 : -1; },
     [](const Node& p, const Node& c, int) {
       c10::SmallVector<int64_t, 4> in(p.inputs.begin(), p.inputs.end());
       in.push_back(c.inputs[1]);
       return in;
     },
     KeptAttrs::kProducer, /*loraJoin=*/true},
};

struct ResolvedRule {
  const OpDef* producer;
  const OpDef* consumer;
  const OpDef* fused;
  const Rule* rule;
};

const std::vector<ResolvedRule>& resolvedRules() {
  static const std::vector<ResolvedRule> rules = [] {
    std::vector<ResolvedRule> out;
    const OpRegistry& ops = OpRegistry::instance();
    for (const Rule& r : kRules) out.push_back({ops.find(r.producer), ops.find(r.consumer), ops.find(r.fused), &r});
    return out;
  }();
  return rules;
}

}  // namespace

struct SegmentFusion::Scratch {
  common::IdMap<int> reads;       // reads of each id in the segment (compute inputs and fetches)
  common::IdMap<char> released;   // ids released in the segment
  common::IdMap<size_t> producer; // node index that writes each id produced in the segment
  void clear() {
    reads.clear();
    released.clear();
    producer.clear();
  }
};

SegmentFusion::SegmentFusion() : scratch_(std::make_unique<Scratch>()) {}
SegmentFusion::~SegmentFusion() = default;

int SegmentFusion::fuse(Segment& segment) {
  if (!common::settings().fusion) return 0;
  Scratch& s = *scratch_;
  s.clear();
  auto& nodes = segment.nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = nodes[i];
    if (node.kind == NodeKind::kRelease) s.released.put(node.outputs[0], 1);
    if (node.kind == NodeKind::kCompute || node.kind == NodeKind::kFetch) {
      for (int64_t id : node.inputs) ++s.reads.tryPut(id, 0);
    }
    if (node.kind == NodeKind::kCompute && node.outputs.size() == 1) s.producer.put(node.outputs[0], i);
  }
  int fused = 0;
  for (Node& consumer : nodes) {
    if (consumer.kind != NodeKind::kCompute) continue;
    // a fused node is offered to the rules again: its new inputs may fuse in turn (mul -> add
    // gives an addcmul, which a layer norm before the mul then joins)
    for (size_t rule = 0; rule < resolvedRules().size(); ++rule) {
      const ResolvedRule& r = resolvedRules()[rule];
      if (consumer.op != r.consumer || !r.fused || (r.rule->loraJoin && !common::settings().loraJoin)) continue;
      const Node* producer = nullptr;
      int64_t t = 0;
      int slot = -1;
      for (int64_t id : consumer.inputs) {
        const size_t* at = s.producer.find(id);
        const int* reads = s.reads.find(id);
        if (!at || !reads || *reads != 1 || !s.released.contains(id)) continue;
        const Node& p = nodes[*at];
        if (p.op != r.producer || p.meshId != consumer.meshId) continue;
        slot = r.rule->slot(p, consumer, id);
        if (slot >= 0) {
          producer = &p;
          t = id;
          break;
        }
      }
      if (!producer) continue;
      // the fused node reads its inputs in place of the pair: an input both read (x in cat([x,
      // linear(x, A)])) is read once now; the producer's other reads pass to it (counts stand)
      c10::SmallVector<int64_t, 4> inputs = r.rule->inputsOf(*producer, consumer, slot);
      for (int64_t id : consumer.inputs) {
        if (id != t) --*s.reads.find(id);
      }
      for (int64_t id : producer->inputs) --*s.reads.find(id);
      for (int64_t id : inputs) ++*s.reads.find(id);
      consumer.inputs = std::move(inputs);
      consumer.inputMeshId = producer->inputMeshId;
      consumer.op = r.fused;
      if (r.rule->attrs == KeptAttrs::kProducer) consumer.attrs = producer->attrs;
      else if (r.rule->attrs == KeptAttrs::kBoth) consumer.attrs.insert(consumer.attrs.begin(), producer->attrs.begin(), producer->attrs.end());
      else if (r.rule->attrs == KeptAttrs::kNone) consumer.attrs.clear();
      // t is read no more: the plan drops the producer as dead code, and its reads of its own
      // inputs pass to the fused node (their counts stand)
      --*s.reads.find(t);
      ++fused;
      rule = static_cast<size_t>(-1);  // from the first rule again
    }
  }
  return fused;
}

}  // namespace dtorch::core
