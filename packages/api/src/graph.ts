// dt.graph: the eager graph's replay of repeated work (DESIGN §2.3). The controller recognises a
// segment it has lowered before (the same ops, shapes, placements and meshes, inputs in the same
// roles) without being asked; step() marks the start and end of one step of a loop (a diffusion
// step, an encoder forward) so that every step is cut into the same segments; stats() says what
// was recognised. DTORCH_GRAPHS=0 turns recognition off. Replaying a recognised segment's
// lowering, and capturing it as a CUDA graph on GPUs, builds on this (docs/engine.md).
import { engine, type GraphStats } from '@dtorch/core';

export type { GraphStats };

/**
 * Runs `fn` as one step of a loop: what was recorded before goes to the workers first, and what
 * `fn` records is cut into segments the same way every time it runs, so that repeated steps are
 * recognised (and, with replay, replayed). Returns what `fn` returns; a promise is awaited for
 * the step's end.
 */
export function step<T>(fn: () => T): T {
  const e = engine();
  e.beginStep();
  let result: T;
  try {
    result = fn();
  } catch (err) {
    e.beginStep();
    throw err;
  }
  if (result instanceof Promise) return result.finally(() => e.beginStep()) as T;
  e.beginStep();
  return result;
}

/** What the controller recognised of the segments it lowered since the engine started. */
export function stats(): GraphStats {
  return engine().graphStats();
}
