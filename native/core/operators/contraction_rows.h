// Placement rows of a contraction, derived from its einsum equation as DTensor derives its
// einsum strategies (mk,kn->mn for matmul, ...k,nk->...n for linear): a letter of the output
// splits every operand that has it, the others whole, and the output along it; a contracted
// letter splits every operand that has it and leaves partial sums; a partial operand beside whole
// ones stays partial. Operands added to the product (a bias) follow the output: split where it
// splits and they have the letter, whole where they lack it, partial where it is partial.
#pragma once
#include <vector>

#include "core/operators/signature.h"

namespace dtorch::core {

// One operand's dims, outermost first: a letter per dim, and whether the dim has the output's
// whole extent (false: broadcast from size 1, which never splits).
struct ContractionOperand {
  std::vector<char> letters;
  std::vector<bool> whole;
  bool added = false;  // added to the product, not multiplied into it
};

// The rows, in order: the output's letters in its order, then the contracted letters in their
// order of first appearance, then the partial operands (sum, then avg). Where two or more
// operands split in a row, each may also come whole and be sliced locally.
void contractionRows(const std::vector<ContractionOperand>& operands, const std::vector<char>& output, SignatureRows& rows);

}  // namespace dtorch::core
