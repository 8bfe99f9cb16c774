// Initial parameter values, as PyTorch's layers draw them (the values are usually replaced by
// loadStateDict; the distributions match so that an unloaded model still behaves sensibly).
import * as dt from '@dtorch/api';
import { Parameter } from './parameter.js';

export interface ParameterLayout {
  mesh: dt.DeviceMesh;
  placements: readonly dt.Placement[];
  dtype: dt.DType;
}

/** U(-bound, bound): nn.Linear / nn.Conv2d weights and biases (kaiming_uniform with a=sqrt(5) gives 1/sqrt(fan_in)). */
export function uniformParameter(shape: readonly number[], bound: number, layout: ParameterLayout): Parameter {
  return new Parameter(
    dt.tidy(() => {
      const u = dt.rand(shape, { mesh: layout.mesh, placements: layout.placements });
      const scaled = u.mul(2 * bound).sub(bound);
      return layout.dtype === 'float32' ? scaled : scaled.to(layout.dtype);
    }),
  );
}

/** N(0, 1): nn.Embedding weights. */
export function normalParameter(shape: readonly number[], layout: ParameterLayout): Parameter {
  return new Parameter(dt.randn(shape, layout));
}

/** A constant (ones for norm weights, zeros for norm biases). */
export function fullParameter(shape: readonly number[], value: number, layout: ParameterLayout): Parameter {
  return new Parameter(dt.full(shape, value, layout));
}
