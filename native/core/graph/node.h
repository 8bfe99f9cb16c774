// Node: one recorded step of the client's program. Compute nodes run an operator; the other
// kinds are system steps the controller lowers itself (release, fetch, sync).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <memory>

#include "core/operand/meta.h"

namespace dtorch::core {

struct OpDef;
struct Completion;

enum class NodeKind : uint8_t { kCompute, kRelease, kFetch, kSync };

struct Node {
  NodeKind kind = NodeKind::kCompute;
  uint64_t seq = 0;                     // record order; names the JS call site in errors
  const OpDef* op = nullptr;            // kCompute only
  int meshId = 0;
  c10::SmallVector<int64_t, 4> inputs;  // tensor ids read (kCompute, kFetch)
  c10::SmallVector<int64_t, 2> outputs; // tensor ids written (kCompute) or released (kRelease)
  c10::SmallVector<double, 8> attrs;    // op attributes, layout documented per op
  c10::SmallVector<TensorMeta, 1> outputMetas;
  at::Tensor hostData;                  // full host tensor for ops created from JS data
  std::shared_ptr<Completion> completion;  // kFetch, kSync
};

}  // namespace dtorch::core
