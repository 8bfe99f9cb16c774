// to(dtype): dtype conversion.
import { invalidParameter } from '@dtorch/common';
import { engine } from '@dtorch/core';
import { checkDtype, type DType } from '../dtype.js';
import { output } from '../record.js';
import { Tensor } from '../tensor.js';

export function to(x: Tensor, dtype: DType): Tensor {
  if (!(x instanceof Tensor)) throw invalidParameter('to input', 'Tensor', x);
  const e = engine();
  e.args[0] = x.id;
  e.args[1] = e.dtypeCode(checkDtype(dtype));
  e.record(e.ops['to']!.code, 1, 1);
  return output(x.mesh);
}
