// to(dtype): dtype conversion.
import { invalidParameter } from '@dtorch/common';
import { engine } from '@dtorch/core';
import { checkDtype, type DType } from '../dtype.js';
import { recordOp } from '../record.js';
import { Tensor } from '../tensor.js';

/**
 * `x` converted to `dtype`, as torch.Tensor.to(dtype): floats to integers truncate, as PyTorch
 * casts; shape and placements unchanged.
 * @see {@link Tensor.to}
 */
export function to(x: Tensor, dtype: DType): Tensor {
  if (!(x instanceof Tensor)) throw invalidParameter('to input', 'Tensor', x);
  return recordOp('to', [x], [engine().dtypeCode(checkDtype(dtype))]);
}
