#include "core/graph/call_trace.h"

#include <unordered_map>
#include <unordered_set>

#include "core/operators/op.h"

namespace dtorch::core {

std::unique_ptr<CallTrace> traceCall(const std::vector<Node>& nodes, c10::ArrayRef<int64_t> arguments,
                                     const std::vector<TensorMeta>& argumentMetas, c10::ArrayRef<int64_t> outputs, std::string& why) {
  auto trace = std::make_unique<CallTrace>();
  trace->arguments = argumentMetas;
  std::unordered_map<int64_t, int> argumentAt;  // id -> first position
  for (size_t k = 0; k < arguments.size(); ++k) {
    const int at = argumentAt.emplace(arguments[k], static_cast<int>(k)).first->second;
    trace->argumentAlias.push_back(at);
  }
  std::unordered_map<int64_t, int64_t> madeAt;  // id -> made position, while live
  std::unordered_set<int64_t> outsideSeen;
  trace->nodes.reserve(nodes.size());
  for (const Node& node : nodes) {
    switch (node.kind) {
      case NodeKind::kFetch:
      case NodeKind::kSync:
        why = "it waits for the devices (a read or a sync inside it); a copy would not read again";
        return nullptr;
      case NodeKind::kRelease: {
        const auto made = madeAt.find(node.outputs[0]);
        if (made == madeAt.end()) {
          why = "it disposes tensor " + std::to_string(node.outputs[0]) + ", which it did not make (an argument or a tensor from before the call)";
          return nullptr;
        }
        TracedNode& traced = trace->nodes.emplace_back();
        traced.node = node;
        traced.inputs.push_back({TraceRef::Role::kMade, made->second});
        madeAt.erase(made);
        break;
      }
      case NodeKind::kCompute: {
        if (node.hostData.defined()) {
          why = "it makes a tensor from host data (" + std::string(node.op->name) +
                ", as dt.tensor does) on each call, which may differ between calls; make it once outside and pass it in";
          return nullptr;
        }
        TracedNode& traced = trace->nodes.emplace_back();
        traced.node = node;
        for (int64_t id : node.inputs) {
          if (const auto made = madeAt.find(id); made != madeAt.end()) {
            traced.inputs.push_back({TraceRef::Role::kMade, made->second});
          } else if (const auto argument = argumentAt.find(id); argument != argumentAt.end()) {
            traced.inputs.push_back({TraceRef::Role::kArgument, argument->second});
          } else {
            traced.inputs.push_back({TraceRef::Role::kOutside, id});
            if (outsideSeen.insert(id).second) trace->outside.push_back(id);
          }
        }
        for (int64_t id : node.outputs) madeAt.emplace(id, trace->made++);
        break;
      }
    }
  }
  std::unordered_set<int64_t> returned;
  for (int64_t id : outputs) {
    const auto made = madeAt.find(id);
    if (made == madeAt.end()) {
      why = "it returns tensor " + std::to_string(id) + ", which it did not make (an argument or a tensor from before the call)";
      return nullptr;
    }
    trace->outputs.push_back(made->second);
    returned.insert(id);
  }
  if (madeAt.size() > returned.size()) {
    why = "it keeps " + std::to_string(madeAt.size() - returned.size()) +
          " tensors it made besides those it returns (a cache filled on its first call, or intermediates outside a tidy())";
    return nullptr;
  }
  return trace;
}

size_t headCut(const CallTrace& trace, int64_t minComputeNodes) {
  const size_t n = trace.nodes.size();
  int64_t computeNodes = 0;
  for (const TracedNode& t : trace.nodes) computeNodes += t.node.kind == NodeKind::kCompute;
  if (minComputeNodes <= 0 || computeNodes < minComputeNodes || computeNodes < 8) return 0;
  // the bytes of the call's own tensors alive across each position: a cut there makes them a
  // graph's outputs on one side and its inputs on the other, copied on every replay. Alive before
  // node i runs: the prefix sum of delta up to i (made after its node, gone after its release;
  // returned tensors are never released, alive to the end).
  std::vector<int64_t> delta(n + 1, 0);
  std::vector<int64_t> madeBytes;  // by made position
  madeBytes.reserve(static_cast<size_t>(trace.made));
  for (size_t i = 0; i < n; ++i) {
    const TracedNode& t = trace.nodes[i];
    if (t.node.kind == NodeKind::kRelease) {
      delta[i + 1] -= madeBytes[static_cast<size_t>(t.inputs[0].index)];
      continue;
    }
    for (const TensorMeta& m : t.node.outputMetas) {
      madeBytes.push_back(m.nbytes());
      delta[i + 1] += m.nbytes();
    }
  }
  // early enough that the devices start soon, late enough that the first part outlasts copying,
  // lowering and launching the rest: after a quarter to a half of the compute nodes, where
  // compiled text encoders ran fastest of the cuts tried (docs/engine.md, "Compiled calls")
  size_t best = 0;
  int64_t bestBytes = 0, alive = 0, compute = 0;
  for (size_t i = 0; i < n; ++i) {
    alive += delta[i];
    if (compute >= computeNodes / 4 && compute <= computeNodes / 2 && (best == 0 || alive < bestBytes)) {
      best = i;
      bestBytes = alive;
    }
    compute += trace.nodes[i].node.kind == NodeKind::kCompute;
  }
  return best;
}

}  // namespace dtorch::core
