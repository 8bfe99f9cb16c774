// Linear algebra: matmul with torch.matmul's rules (1-D operands, broadcast batch dims).
import { invalidParameter } from '@dtorch/common';
import { engine } from '@dtorch/core';
import { output } from '../record.js';
import { Tensor } from '../tensor.js';

export function matmul(a: Tensor, b: Tensor): Tensor {
  if (!(a instanceof Tensor)) throw invalidParameter('matmul input', 'Tensor', a);
  if (!(b instanceof Tensor)) throw invalidParameter('matmul other', 'Tensor', b);
  const e = engine();
  e.args[0] = a.id;
  e.args[1] = b.id;
  e.record(e.ops['matmul']!.code, 2, 0);
  return output(a.mesh);
}
