// Linear algebra: matmul with torch.matmul's rules (1-D operands, broadcast batch dims), outer,
// and einsum for permutations (F.linear is in nn.ts).
import { DTorchError, ErrorCode, invalidParameter } from '@dtorch/common';
import { checkTensor, recordOp } from '../record.js';
import { atomic } from '../scope.js';
import { Tensor } from '../tensor.js';
import { mul } from './elementwise.js';
import { permute, unsqueeze } from './shape.js';

/**
 * Matrix product with torch.matmul's rules: 1-D operands act as a row or column vector, batch
 * dims broadcast. Rows of `a` sharded give rows of the result sharded, columns of `other`
 * sharded give columns sharded, and the inner dim sharded on both (or on one, the other
 * Replicate) gives Partial(sum).
 * @see {@link Tensor.matmul}
 */
export function matmul(a: Tensor, other: Tensor): Tensor {
  if (!(a instanceof Tensor)) throw invalidParameter('matmul input', 'Tensor', a);
  if (!(other instanceof Tensor)) throw invalidParameter('matmul other', 'Tensor', other);
  return recordOp('matmul', [a, other], []);
}

/** The outer product of two vectors. */
export function outer(a: Tensor, b: Tensor): Tensor {
  for (const [name, t] of [['a', a], ['b', b]] as const) {
    if (checkTensor(`outer ${name}`, t).ndim !== 1) throw new DTorchError(ErrorCode.ShapeMismatch, `outer: ${name} must be 1-d, got ${t.describe()}`);
  }
  return atomic(() => {
    const [column, row] = [unsqueeze(a, 1), unsqueeze(b, 0)];
    const result = mul(column, row);
    column.dispose();
    row.dispose();
    return result;
  });
}

/** einsum for one operand whose equation only permutes dims, e.g. 'bhsd->bshd'. */
export function einsum(equation: string, ...operands: Tensor[]): Tensor {
  if (typeof equation !== 'string') throw invalidParameter('einsum equation', 'string', equation);
  const m = /^\s*([a-zA-Z]+)\s*->\s*([a-zA-Z]+)\s*$/.exec(equation);
  if (!m || operands.length !== 1) {
    throw new DTorchError(ErrorCode.InvalidArgument, `einsum: only permutations of one operand ('abc->cab') are supported, got '${equation}' with ${operands.length} operand(s)`);
  }
  const [from, to] = [m[1]!, m[2]!];
  const x = checkTensor('einsum operand', operands[0]);
  if (from.length !== x.ndim || to.length !== from.length || [...to].some((c) => !from.includes(c)) || new Set(from).size !== from.length) {
    throw new DTorchError(ErrorCode.InvalidArgument, `einsum: '${equation}' is not a permutation of the ${x.ndim} dims of a tensor of shape [${x.shape.join(', ')}]`);
  }
  return permute(x, [...to].map((c) => from.indexOf(c)));
}
