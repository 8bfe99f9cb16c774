// Initial parameter values, as PyTorch's layers draw them (the values are usually replaced by
// loadStateDict; the distributions match so that an unloaded model still behaves sensibly).
// Inside skipInit() parameters are left uninitialised instead: no random draws, no fills.
import * as dt from '@dtorch/api';
import { invalidParameter } from '@dtorch/common';
import { Parameter } from './parameter.js';

let skipping = 0;

/**
 * Builds modules without initialising their parameters (as torch.nn.utils.skip_init): for a
 * model whose weights loadStateDict() replaces next, which spares drawing and filling every
 * weight (and, when the load follows at once, even allocating it: an uninitialised tensor
 * released unread is never created). Returns what `build` returns.
 */
export function skipInit<T>(build: () => T): T {
  if (typeof build !== 'function') throw invalidParameter('skipInit build', 'function', build);
  skipping++;
  try {
    return build();
  } finally {
    skipping--;
  }
}

/** Whether parameters made now are left uninitialised (inside skipInit()). */
export function initSkipped(): boolean {
  return skipping > 0;
}

const uninitialised = (shape: readonly number[], layout: ParameterLayout) => new Parameter(dt.empty(shape, layout));

export interface ParameterLayout {
  mesh: dt.DeviceMesh;
  placements: readonly dt.Placement[];
  dtype: dt.DType;
}

/** U(-bound, bound): nn.Linear / nn.Conv2d weights and biases (kaiming_uniform with a=sqrt(5) gives 1/sqrt(fan_in)). */
export function uniformParameter(shape: readonly number[], bound: number, layout: ParameterLayout): Parameter {
  if (skipping) return uninitialised(shape, layout);
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
  if (skipping) return uninitialised(shape, layout);
  return new Parameter(dt.randn(shape, layout));
}

/** A constant (ones for norm weights, zeros for norm biases). */
export function fullParameter(shape: readonly number[], value: number, layout: ParameterLayout): Parameter {
  if (skipping) return uninitialised(shape, layout);
  return new Parameter(dt.full(shape, value, layout));
}
