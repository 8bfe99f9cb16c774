// dt.graph.compile: a function whose first call on arguments of given shapes is traced (what it
// records is kept, natively: core/graph/call_trace.h), and whose later calls on the same shapes
// record a copy of that trace without running the function again. The engine gets the same ops
// either way, so its results are the same bits; what goes is the host's time in the function's
// own code (for a CLIP text encoder, most of what a forward costs the program). As
// torch.cuda.make_graphed_callables, this assumes the function records the same ops whenever
// its arguments have the same shapes and its other inputs (weights, settings) are the same: a
// trace is dropped when a tensor it reads from before the call is disposed, never because the
// function would now do something else.
import { DTorchError, ErrorCode } from '@dtorch/common';
import { engine } from '@dtorch/core';
import type { DeviceMesh } from './device_mesh.js';
import type { DType } from './dtype.js';
import type { Placement } from './placement.js';
import { isTensor, Tensor } from './tensor.js';

/** What a compiled function did on its calls so far (for tests and benchmarks). */
export interface CompiledStats {
  /** Calls whose recording was traced (run once, kept). */
  traces: number;
  /** Calls recorded by copying a trace, without running the function. */
  replays: number;
  /** Calls that ran the function as it is (a trace could not be kept, or graphs are off). */
  plainCalls: number;
  /** Why the last trace that could not be kept was refused, if one was. */
  lastRefusal?: string;
}

/** A compiled function: called as the function it compiles; `stats` says how its calls went. */
export type CompiledFunction<A extends unknown[], R> = ((...args: A) => R) & {
  /** How its calls went so far: traced, copied, or run as they are. */
  readonly stats: Readonly<CompiledStats>;
};

/** Options of {@link compile}. */
export interface CompileOptions {
  /** How many argument shapes keep a trace each (the least recently used goes first); default 8. */
  maxShapes?: number;
}

// A call's tensors in order, and how to rebuild it with other tensors in their places.
interface Flattened<T> {
  tensors: Tensor[];
  rebuild(tensors: readonly Tensor[]): T;
}

// What a kept output looked like (not the tensor itself: holding it would keep it alive).
interface OutputDescription {
  shape: readonly number[];
  dtype: DType;
  mesh: DeviceMesh;
  placements: readonly Placement[];
}

interface Trace<R> {
  id: number;
  outputs: OutputDescription[];
  rebuild(tensors: readonly Tensor[]): R;
}

interface ShapeEntry<R> {
  trace?: Trace<R>;
  refusals: number;
}

// After this many refused traces of one argument shape, its calls run as they are: the first
// calls may fill caches (kept tensors), later ones cannot.
const maxRefusals = 3;

// The trace being recorded now (the engine keeps one at a time): a compiled call inside it
// replays its own trace, or runs as it is.
let tracing = false;

// Forgets the traces of a compiled function that was collected.
const traceIds = new FinalizationRegistry<Set<number>>((ids) => {
  for (const id of ids) engine().dropTrace(id);
});

// Identity numbers for objects that are not plain data (a module, a mesh): the same object is the same key.
const identities = new WeakMap<object, number>();
let nextIdentity = 1;
function identityOf(value: object): number {
  let id = identities.get(value);
  if (id === undefined) identities.set(value, (id = nextIdentity++));
  return id;
}

// The key of one argument (tensors by description, plain data by value, other objects by
// identity); the tensors found are appended to `tensors`.
function keyOf(value: unknown, tensors: Tensor[], depth: number): string {
  if (isTensor(value)) {
    tensors.push(value);
    return `T(${value.dtype};${value.shape.join(',')};${value.mesh.id};${value.placements.map((p) => p.code()).join(',')})`;
  }
  if (value === null || value === undefined || typeof value === 'number' || typeof value === 'boolean' || typeof value === 'string') {
    return typeof value === 'string' ? JSON.stringify(value) : String(value);
  }
  if (typeof value === 'bigint') return `${value}n`;
  if (depth < 16 && Array.isArray(value)) return `[${value.map((v) => keyOf(v, tensors, depth + 1)).join(',')}]`;
  if (depth < 16 && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    return `{${Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => `${JSON.stringify(k)}:${keyOf(v, tensors, depth + 1)}`)
      .join(',')}}`;
  }
  return `#${identityOf(value as object)}`;
}

// `value` (a result) as its tensors and a rebuild, or undefined when it holds something other
// than tensors, arrays, plain objects and plain values (a replay could not make it again).
function flatten<T>(value: T, tensors: Tensor[] = [], depth = 0): Flattened<T> | undefined {
  if (isTensor(value)) {
    const at = tensors.push(value) - 1;
    return { tensors, rebuild: (ts) => ts[at] as T };
  }
  if (value === null || typeof value !== 'object') return { tensors, rebuild: () => value };
  if (depth >= 16) return undefined;
  if (Array.isArray(value)) {
    const parts: Flattened<unknown>[] = [];
    for (const v of value) {
      const part = flatten(v, tensors, depth + 1);
      if (!part) return undefined;
      parts.push(part);
    }
    return { tensors, rebuild: (ts) => parts.map((p) => p.rebuild(ts)) as T };
  }
  if (Object.getPrototypeOf(value) !== Object.prototype) return undefined;
  const entries: [string, Flattened<unknown>][] = [];
  for (const [k, v] of Object.entries(value)) {
    const part = flatten(v, tensors, depth + 1);
    if (!part) return undefined;
    entries.push([k, part]);
  }
  return { tensors, rebuild: (ts) => Object.fromEntries(entries.map(([k, p]) => [k, p.rebuild(ts)])) as T };
}

/**
 * Compiles `fn` for replay: its first call on arguments of given shapes runs it and keeps what
 * it recorded; later calls on arguments of the same shapes (tensors of the same shapes, dtypes,
 * meshes and placements; other arguments equal) record a copy of that, with the new arguments
 * in the old ones' places, without running `fn`. Results are the same bits as running it.
 *
 * `fn` must record the same ops whenever its arguments look the same, as for
 * `torch.cuda.make_graphed_callables`: state it reads besides its arguments (weights, settings)
 * is read as it was when it was traced. A trace is dropped (and `fn` traced again) when a
 * tensor it read from before the call is disposed. A call that reads values (`data()`,
 * `sync()`), makes tensors from host data (`dt.tensor`), disposes its arguments or keeps tensors
 * it made (besides its result) is not traced: it runs as it is. `dt.graph.setEnabled(false)`
 * (or `DTORCH_GRAPHS=0`) runs every call as it is.
 */
export function compile<A extends unknown[], R>(fn: (...args: A) => R, options: CompileOptions = {}): CompiledFunction<A, R> {
  if (typeof fn !== 'function') throw new DTorchError(ErrorCode.InvalidArgument, `dt.graph.compile(fn) expects a function, got ${typeof fn}`);
  const maxShapes = options.maxShapes ?? 8;
  if (!Number.isInteger(maxShapes) || maxShapes < 1) {
    throw new DTorchError(ErrorCode.InvalidArgument, `dt.graph.compile: maxShapes must be a positive integer, got ${String(options.maxShapes)}`);
  }
  const shapes = new Map<string, ShapeEntry<R>>(); // most recently used last
  const live = new Set<number>(); // trace ids, dropped with the function
  const stats: CompiledStats = { traces: 0, replays: 0, plainCalls: 0 };

  const forget = (entry: ShapeEntry<R>) => {
    if (!entry.trace) return;
    live.delete(entry.trace.id);
    engine().dropTrace(entry.trace.id);
    entry.trace = undefined;
  };

  // the copy's result, or undefined when the trace does not fit these arguments
  const replay = (trace: Trace<R>, tensors: Tensor[]): { result: R } | undefined => {
    const ids = engine().replayTrace(
      trace.id,
      tensors.map((t) => t.id),
      trace.outputs.length,
    );
    if (!ids) return undefined;
    stats.replays++;
    const outputs = ids.map((id, k) => new Tensor(id, trace.outputs[k]!.shape, trace.outputs[k]!.dtype, trace.outputs[k]!.mesh, trace.outputs[k]!.placements));
    return { result: trace.rebuild(outputs) };
  };

  const plain = (args: A): R => {
    stats.plainCalls++;
    return fn(...args);
  };

  const traced = (args: A, tensors: Tensor[], entry: ShapeEntry<R>): R => {
    const e = engine();
    e.beginTrace();
    tracing = true;
    let result: R;
    try {
      result = fn(...args);
    } catch (err) {
      e.abortTrace();
      throw err;
    } finally {
      tracing = false;
    }
    const refuse = (why: string) => {
      stats.lastRefusal = why;
      entry.refusals++;
      stats.plainCalls++;
      return result;
    };
    const flat = result instanceof Promise ? undefined : flatten(result);
    if (!flat) {
      e.abortTrace();
      entry.refusals = maxRefusals; // its result cannot be made again, whatever the call
      return refuse('it returns something other than tensors, arrays, plain objects and plain values');
    }
    const gone = [...tensors, ...flat.tensors].find((t) => t.isDisposed);
    if (gone) {
      e.abortTrace();
      return refuse(`it disposes ${tensors.includes(gone) ? 'an argument' : 'a tensor it returns'}`);
    }
    const id = e.endTrace(
      tensors.map((t) => t.id),
      flat.tensors.map((t) => t.id),
    );
    if (typeof id === 'string') return refuse(id);
    stats.traces++;
    entry.refusals = 0; // the caches are filled: a trace dropped later may refuse anew while they refill
    live.add(id);
    entry.trace = {
      id,
      outputs: flat.tensors.map((t) => ({ shape: t.shape, dtype: t.dtype, mesh: t.mesh, placements: t.placements })),
      rebuild: flat.rebuild,
    };
    return result;
  };

  const compiled = (...args: A): R => {
    if (!graphsOn()) return plain(args);
    const tensors: Tensor[] = [];
    const key = keyOf(args, tensors, 0);
    let entry = shapes.get(key);
    if (entry) {
      shapes.delete(key); // most recently used goes last
      shapes.set(key, entry);
      if (entry.trace) {
        const copied = replay(entry.trace, tensors);
        if (copied) return copied.result;
        forget(entry); // a tensor it read is gone, or the arguments alias differently: trace again
      }
    } else {
      entry = { refusals: 0 };
      shapes.set(key, entry);
      if (shapes.size > maxShapes) {
        const [oldestKey, oldest] = shapes.entries().next().value as [string, ShapeEntry<R>];
        forget(oldest);
        shapes.delete(oldestKey);
      }
    }
    if (tracing || entry.refusals >= maxRefusals) return plain(args);
    return traced(args, tensors, entry);
  };
  traceIds.register(compiled, live);
  return Object.assign(compiled, { stats: stats as Readonly<CompiledStats> });
}

// dt.graph.setEnabled keeps this in step; read once from the engine at first use.
let graphsEnabled: boolean | undefined;
function graphsOn(): boolean {
  return (graphsEnabled ??= engine().graphStats().enabled);
}

/** @internal dt.graph.setEnabled: compiled calls run as they are while graphs are off. */
export function setCompiledGraphs(on: boolean): void {
  graphsEnabled = on;
}
