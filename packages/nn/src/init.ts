// Initial parameter values, as PyTorch's layers draw them (the values are usually replaced by
// loadStateDict; the distributions match so that an unloaded model still behaves sensibly).
// Inside skipInit() parameters are left uninitialised instead: no random draws, no fills.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkInteger, checkKnownOptions, invalidParameter } from '@dtorch/common';
import { Parameter } from './parameter.js';

let skipping = 0;
// skipInit's element budget while one is given: what is left, and the error for going past it
let budget: { left: number; tooLarge: (maxElements: number) => Error; maxElements: number } | undefined;

/** skipInit's options. */
export interface SkipInitOptions {
  /**
   * At most this many parameter elements in all: a build asking for more (a config whose sizes
   * the weights to load cannot fill) is stopped before the parameter that passes it is made.
   */
  maxElements?: number;
  /** The error thrown when maxElements is passed (default INVALID_ARGUMENT naming the budget). */
  tooLarge?: (maxElements: number) => Error;
}

/**
 * Builds modules without initialising their parameters (as torch.nn.utils.skip_init): for a
 * model whose weights loadStateDict() replaces next, which spares drawing and filling every
 * weight (and, when the load follows at once, even allocating it: an uninitialised tensor
 * released unread is never created). Returns what `build` returns. With `maxElements`, the
 * build throws once its parameters would hold more elements than that.
 */
export function skipInit<T>(build: () => T, options?: SkipInitOptions): T {
  if (typeof build !== 'function') throw invalidParameter('skipInit build', 'function', build);
  const o = checkKnownOptions<SkipInitOptions>('skipInit options', options, ['maxElements', 'tooLarge']);
  if (o.maxElements !== undefined) checkInteger('skipInit maxElements', o.maxElements, 0);
  if (o.tooLarge !== undefined && typeof o.tooLarge !== 'function') throw invalidParameter('skipInit tooLarge', 'function', o.tooLarge);
  const outer = budget;
  if (o.maxElements !== undefined) {
    const maxElements = o.maxElements;
    const tooLarge = o.tooLarge ?? ((n: number) => new DTorchError(ErrorCode.InvalidArgument, `skipInit: the modules built ask for more than maxElements (${n}) parameter elements`));
    budget = { left: maxElements, tooLarge, maxElements };
  }
  skipping++;
  try {
    return build();
  } finally {
    skipping--;
    budget = outer;
  }
}

/** Whether parameters made now are left uninitialised (inside skipInit()). */
export function initSkipped(): boolean {
  return skipping > 0;
}

// counts `shape`'s elements against skipInit's budget, before anything is made
function spend(shape: readonly number[]): void {
  if (!budget) return;
  budget.left -= shape.reduce((n, d) => n * d, 1);
  if (budget.left < 0) throw budget.tooLarge(budget.maxElements);
}

const uninitialised = (shape: readonly number[], layout: ParameterLayout) => {
  spend(shape);
  return new Parameter(dt.empty(shape, layout));
};

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
