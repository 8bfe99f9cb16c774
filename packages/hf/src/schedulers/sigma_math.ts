// The host-side numbers of the flow-matching schedules, in the precision diffusers computes them:
// numpy float64 where its arrays are float64, float32 where they are float32 (custom sigmas or
// timesteps). `Precision` rounds after every operation as the array's dtype does; a Python
// float meeting a float32 array is rounded to float32 first (NumPy 2's rule, NEP 50).
import type { TimeShiftType } from './flow_match_euler_discrete_config.js';

/** Rounding of a result to an array dtype's precision. */
export type Round = (x: number) => number;

/** Rounding after each operation: none for float64, Math.fround for float32. */
export const float64: Round = (x) => x;
/** float32's rounding: Math.fround. */
export const float32: Round = Math.fround;

/** numpy.linspace(start, stop, num) in float64, step by step as numpy computes it. */
export function linspace(start: number, stop: number, num: number): number[] {
  if (num === 1) return [start];
  const step = (stop - start) / (num - 1);
  // numpy divides first when the step underflows to zero (denormal ranges)
  const at = step === 0 ? (i: number) => (i / (num - 1)) * (stop - start) : (i: number) => i * step;
  const y = Array.from({ length: num }, (_, i) => at(i) + start);
  y[num - 1] = stop;
  return y;
}

/** The static shift of SD3: shift·σ / (1 + (shift − 1)·σ). */
export function staticShift(sigmas: readonly number[], shift: number, r: Round): number[] {
  const s = r(shift);
  const s1 = r(shift - 1);
  return sigmas.map((x) => r(r(s * x) / r(1 + r(s1 * x))));
}

/** Resolution-dependent shift (Flux): e^μ / (e^μ + (1/σ − 1)) or μ / (μ + (1/σ − 1)), with diffusers' exponent 1. */
export function timeShift(sigmas: readonly number[], mu: number, type: TimeShiftType, r: Round): number[] {
  const m = r(type === 'exponential' ? Math.exp(mu) : mu);
  return sigmas.map((x) => r(m / r(m + r(r(1 / x) - 1))));
}

/** Stretches the schedule so that its last sigma is `terminal` (LTX-Video's shift_terminal). */
export function stretchToTerminal(sigmas: readonly number[], terminal: number, r: Round): number[] {
  const oneMinus = sigmas.map((x) => r(1 - x));
  const scale = r(oneMinus.at(-1)! / r(1 - terminal));
  return oneMinus.map((x) => r(1 - r(x / scale)));
}

/** Karras et al.'s schedule (ρ = 7) between the first and last sigma, in float64. */
export function karrasSigmas(sigmas: readonly number[], n: number): number[] {
  const rho = 7.0;
  const minInvRho = sigmas.at(-1)! ** (1 / rho);
  const maxInvRho = sigmas[0]! ** (1 / rho);
  return linspace(0, 1, n).map((ramp) => (maxInvRho + ramp * (minInvRho - maxInvRho)) ** rho);
}

/** Sigmas evenly spaced in log between the first and last sigma, in float64. */
export function exponentialSigmas(sigmas: readonly number[], n: number): number[] {
  return linspace(Math.log(sigmas[0]!), Math.log(sigmas.at(-1)!), n).map(Math.exp);
}
