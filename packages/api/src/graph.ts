// dt.graph: the eager graph's replay of repeated work (DESIGN §2.3). The controller recognises a
// segment it has lowered before (the same ops, shapes, placements and meshes, inputs in the same
// roles) without being asked; step() marks the start and end of one step of a loop (a diffusion
// step, an encoder forward) so that every step is cut into the same segments; stats() says what
// was recognised and replayed. On a GPU, each worker captures the repeated spans of its work as
// CUDA graphs and replays them with one launch (native/core/kernel_stream/graph_replays.h).
// compile() goes further for a function called again and again (a model's forward): its later
// calls copy what its first call recorded, without running its code (compiled_call.ts).
// DTORCH_GRAPHS=0, or setEnabled(false), turns recognition and replay off (docs/engine.md).
import { DTorchError, ErrorCode } from '@dtorch/common';
import { engine, type GraphStats } from '@dtorch/core';
import { setCompiledGraphs } from './compiled_call.js';

export type { GraphStats };
export { compile, type CompiledFunction, type CompiledStats, type CompileOptions } from './compiled_call.js';

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

/**
 * Marks the start of a top-level model call (`@dtorch/nn`'s Module.call does it). When what was
 * recorded since the previous call's start is large (64 ops or more), the engine starts new
 * segments here, full-sized, so that a model called again on the same shapes is cut into the
 * same segments each time, and recognised and replayed, without a {@link step} around it.
 * Smaller calls are left alone: a cut per call would cost more than a tiny layer does.
 */
export function beginCall(): void {
  engine().beginCall();
}

/**
 * What the controller recognised of the segments it lowered since the engine started, and what
 * the GPU workers captured and replayed as CUDA graphs.
 */
export function stats(): GraphStats {
  return engine().graphStats();
}

/**
 * Turns the recognition of repeated segments, and with it their replay as CUDA graphs, on or off
 * for what is recorded from now on (`DTORCH_GRAPHS=0` starts with it off). Graphs already
 * captured are kept until their fixed inputs are freed; results are the same either way.
 */
export function setEnabled(on: boolean): void {
  if (typeof on !== 'boolean') {
    throw new DTorchError(ErrorCode.InvalidArgument, `dt.graph.setEnabled(on) expects true or false, got ${typeof on}`);
  }
  engine().setGraphs(on);
  setCompiledGraphs(on);
}

/** Whether repeated segments are recognised and replayed now. */
export function enabled(): boolean {
  return engine().graphStats().enabled;
}
