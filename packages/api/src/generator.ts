// dt.Generator: torch.Generator for DTorch's random ops. A seed and the draws made from it so
// far; a draw with { generator } continues the stream where torch's generator would be after the
// same calls (each rank seeds LibTorch's CPU generator and replays the earlier draws before its
// own), so code written against torch (diffusers drawing a VAE sample, then the noise, from one
// generator) gives the same values on one device and on any mesh. Replaying costs the earlier
// draws' time again: a generator is for the few draws of one call, not a long stream.
import { engine } from '@dtorch/core';
import type { DType } from './dtype.js';
import { checkSeed, nextSeed } from './random_seeds.js';

/** One draw a generator made: its op, dtype, shape (and randint's bounds). */
export interface RandomDraw {
  /** The op that drew. */
  readonly kind: 'rand' | 'randn' | 'randint';
  /** The dtype it drew in (the stream depends on it). */
  readonly dtype: DType;
  /** The full tensor's shape. */
  readonly shape: readonly number[];
  /** randint's lower bound. */
  readonly low?: number;
  /** randint's upper bound (exclusive). */
  readonly high?: number;
}

const DRAW_KINDS = { rand: 0, randn: 1, randint: 2 } as const;

/**
 * A random number generator, as torch.Generator: `new dt.Generator(seed)` is
 * torch.Generator().manual_seed(seed); pass it as `{ generator }` to rand, randn, randint (and
 * their *Like forms): each draw continues from the last.
 */
export class Generator {
  #seed: number;
  // the earlier draws, as the ops' attributes encode them (kind, dtype, ndim, shape..., [low, high])
  #draws: number[] = [];
  #count = 0;

  /** A generator seeded with `seed` (an integer in [0, 2^48)); default the next of manualSeed's sequence. */
  constructor(seed?: number) {
    this.#seed = seed === undefined ? nextSeed() : checkSeed('Generator seed', seed);
  }

  /** Seeds it again and forgets its draws (torch's manual_seed); returns it. */
  manualSeed(seed: number): this {
    this.#seed = checkSeed('Generator.manualSeed seed', seed);
    this.#draws = [];
    this.#count = 0;
    return this;
  }

  /** Its seed (torch's initial_seed). */
  initialSeed(): number {
    return this.#seed;
  }

  /** How many draws it has made since it was seeded. */
  get draws(): number {
    return this.#count;
  }

  /** @internal The earlier draws, encoded as a random op's attributes take them. */
  earlierDraws(): readonly number[] {
    return this.#draws;
  }

  /** @internal Takes note of a draw just recorded. */
  noteDraw(draw: RandomDraw): void {
    this.#draws.push(DRAW_KINDS[draw.kind], engine().dtypeCode(draw.dtype), draw.shape.length, ...draw.shape);
    if (draw.kind === 'randint') this.#draws.push(draw.low!, draw.high!);
    this.#count++;
  }
}
