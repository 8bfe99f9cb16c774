// Linear algebra: matmul with torch.matmul's rules (1-D operands, broadcast batch dims).
import { invalidParameter } from '@dtorch/common';
import { recordOp } from '../record.js';
import { Tensor } from '../tensor.js';

/**
 * Matrix product with torch.matmul's rules: 1-D operands act as a row or column vector, batch
 * dims broadcast. Rows of `a` sharded give rows of the result sharded, columns of `b` sharded give
 * columns sharded, and the inner dim sharded on both (or on one, the other Replicate) gives
 * Partial(sum).
 */
export function matmul(a: Tensor, b: Tensor): Tensor {
  if (!(a instanceof Tensor)) throw invalidParameter('matmul input', 'Tensor', a);
  if (!(b instanceof Tensor)) throw invalidParameter('matmul other', 'Tensor', b);
  return recordOp('matmul', [a, b], []);
}
