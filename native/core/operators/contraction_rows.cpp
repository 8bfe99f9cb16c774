#include "core/operators/contraction_rows.h"

#include <algorithm>

namespace dtorch::core {

namespace {

// The dim of `o` with letter `l` and the whole extent, or -1.
int dimOf(const ContractionOperand& o, char l) {
  for (size_t d = 0; d < o.letters.size(); ++d) {
    if (o.letters[d] == l && o.whole[d]) return static_cast<int>(d);
  }
  return -1;
}

// `in`'s row to `out`; the split operands may come whole (sliced) where two or more split.
void add(const c10::SmallVector<Placement, 3>& in, Placement out, SignatureRows& rows) {
  unsigned split = 0;
  int count = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k].isShard()) split |= 1u << k, ++count;
  }
  rows.push_back(row(in, out, count >= 2 ? split : 0));
}

}  // namespace

void contractionRows(const std::vector<ContractionOperand>& operands, const std::vector<char>& output, SignatureRows& rows) {
  const Placement R = Placement::replicate();
  auto multiplied = [&](char l) {
    return std::any_of(operands.begin(), operands.end(), [&](const ContractionOperand& o) { return !o.added && dimOf(o, l) >= 0; });
  };
  for (size_t od = 0; od < output.size(); ++od) {
    if (!multiplied(output[od])) continue;  // broadcast from 1 everywhere: nothing splits
    c10::SmallVector<Placement, 3> in;
    for (const ContractionOperand& o : operands) {
      const int d = dimOf(o, output[od]);
      in.push_back(d >= 0 ? Placement::shard(d) : R);
    }
    add(in, Placement::shard(static_cast<int32_t>(od)), rows);
  }
  const Placement sum = Placement::partial(ReduceOp::kSum);
  std::vector<char> contracted;
  for (const ContractionOperand& o : operands) {
    if (o.added) continue;
    for (char l : o.letters) {
      if (std::find(output.begin(), output.end(), l) == output.end() && std::find(contracted.begin(), contracted.end(), l) == contracted.end()) {
        contracted.push_back(l);
      }
    }
  }
  for (char l : contracted) {
    c10::SmallVector<Placement, 3> in;
    for (const ContractionOperand& o : operands) {
      const int d = dimOf(o, l);
      in.push_back(o.added ? sum : d >= 0 ? Placement::shard(d) : R);
    }
    add(in, sum, rows);
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    const Placement p = Placement::partial(op);
    for (size_t i = 0; i < operands.size(); ++i) {
      if (operands[i].added) continue;
      c10::SmallVector<Placement, 3> in;
      for (size_t k = 0; k < operands.size(); ++k) in.push_back(k == i || operands[k].added ? p : R);
      add(in, p, rows);
    }
  }
}

}  // namespace dtorch::core
