// The seeds of random ops: a seed the user gives is an integer in [0, 2^48) (seeds travel as
// doubles; well inside exact integers); an op without one takes the next of the sequence that
// manualSeed starts (a random start otherwise), as torch's default generator after manual_seed.
import { invalidParameter, isInteger } from '@dtorch/common';

const SEED_LIMIT = 2 ** 48;
let seedBase = Math.floor(Math.random() * SEED_LIMIT);
let seedCounter = 0;

/** Makes unseeded random ops reproducible from here on, as torch.manual_seed. */
export function manualSeed(seed: number): void {
  // no modulo: two seeds must not silently give one sequence
  checkSeed('manualSeed seed', seed);
  seedBase = seed;
  seedCounter = 0;
}

/** `seed` if it is an integer in [0, 2^48); else INVALID_ARGUMENT naming `name`. */
export function checkSeed(name: string, seed: unknown): number {
  if (!isInteger(seed) || (seed as number) < 0 || (seed as number) >= SEED_LIMIT) throw invalidParameter(name, 'integer in [0, 2^48)', seed);
  return seed as number;
}

/** The next seed of manualSeed's sequence: a different, deterministic seed for every unseeded call after manualSeed(). */
export function nextSeed(): number {
  return (seedBase + ++seedCounter * 0x9e3779b1) % SEED_LIMIT;
}
