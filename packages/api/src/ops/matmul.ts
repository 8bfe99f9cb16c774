// Linear algebra: matmul with torch.matmul's rules (1-D operands, broadcast batch dims).
import { invalidParameter } from '@dtorch/common';
import { recordOp } from '../record.js';
import { Tensor } from '../tensor.js';

export function matmul(a: Tensor, b: Tensor): Tensor {
  if (!(a instanceof Tensor)) throw invalidParameter('matmul input', 'Tensor', a);
  if (!(b instanceof Tensor)) throw invalidParameter('matmul other', 'Tensor', b);
  return recordOp('matmul', [a, b], []);
}
