// Memory scopes, as TF.js has them: tidy() frees the tensors created inside it except those
// it returns or that were kept; dispose() frees now; memory() counts what is live.
import { DTorchError, ErrorCode } from '@dtorch/common';
import { engine, type MemoryInfo, type NativeSettings, type WorkerInfo } from '@dtorch/core';
import type { Tensor } from './tensor.js';

const scopes: Tensor[][] = [];

/** Called for every new tensor: the innermost open tidy() owns it. */
export function trackTensor(t: Tensor): void {
  scopes[scopes.length - 1]?.push(t);
}

type Container = Tensor | readonly Container[] | { readonly [key: string]: Container } | unknown;

function collectTensors(value: Container, out: Set<Tensor>, isTensor: (v: unknown) => v is Tensor, depth = 0): void {
  if (depth > 32 || value === null || typeof value !== 'object') return;
  if (isTensor(value)) {
    out.add(value);
    return;
  }
  if (Array.isArray(value)) {
    for (const v of value) collectTensors(v, out, isTensor, depth + 1);
    return;
  }
  if (Object.getPrototypeOf(value) === Object.prototype || value instanceof Map) {
    const values = value instanceof Map ? [...value.values()] : Object.values(value);
    for (const v of values) collectTensors(v, out, isTensor, depth + 1);
  }
}

let isTensorFn: ((v: unknown) => v is Tensor) | undefined;
/** Set once by tensor.ts (avoids an import cycle at module load). */
export function setTensorCheck(fn: (v: unknown) => v is Tensor): void {
  isTensorFn = fn;
}

/**
 * Runs `fn` and frees every tensor created inside it, except the tensors it returns (in an
 * array, an object or a Map) and kept tensors. Returned tensors move to the enclosing scope.
 */
export function tidy<T>(fn: () => T): T {
  if (typeof fn !== 'function') {
    throw new DTorchError(ErrorCode.InvalidArgument, 'tidy(fn) expects a function');
  }
  const { result, made } = inScope(fn, (t) => !t.kept);
  if (result instanceof Promise) {
    for (const t of made) if (!t.kept) t.dispose();
    throw new DTorchError(ErrorCode.InvalidArgument, 'tidy(fn): fn must be synchronous; await the values after tidy() returns');
  }
  const returned = new Set<Tensor>();
  collectTensors(result, returned, isTensorFn!);
  const parent = scopes[scopes.length - 1];
  for (const t of made) {
    if (returned.has(t)) parent?.push(t);
    else if (!t.kept) t.dispose();
  }
  return result;
}

/**
 * Runs a composite op (one written as several recorded ops): when `fn` throws, every tensor it
 * made is disposed, so a call that fails leaves nothing behind; when it returns, the tensors it
 * made and did not dispose belong to the enclosing scope, as if made there.
 */
export function atomic<T>(fn: () => T): T {
  const { result, made } = inScope(fn, () => true);
  const parent = scopes[scopes.length - 1];
  if (parent) for (const t of made) if (!t.isDisposed) parent.push(t);
  return result;
}

// Runs `fn` as the innermost scope: its result and the tensors made inside it. When it throws,
// the tensors made inside it that `lost` picks are disposed before the error goes on.
function inScope<T>(fn: () => T, lost: (t: Tensor) => boolean): { result: T; made: Tensor[] } {
  const made: Tensor[] = [];
  scopes.push(made);
  try {
    return { result: fn(), made };
  } catch (err) {
    for (const t of made) if (lost(t)) t.dispose();
    throw err;
  } finally {
    scopes.pop();
  }
}

/** Exempts `t` from every enclosing tidy(); it lives until disposed. */
export function keep<T extends Tensor>(t: T): T {
  t.kept = true;
  return t;
}

/** Disposes every tensor in `value` (a tensor, or arrays/objects of them). */
export function dispose(value: Container): void {
  const found = new Set<Tensor>();
  collectTensors(value, found, isTensorFn!);
  for (const t of found) t.dispose();
}

/** Live tensors and bytes, overall and per device (allocatedBytes: what workers hold now). */
export function memory(): MemoryInfo {
  return engine().memory();
}

/**
 * Capture the JS call site of recorded ops, so that a kernel failing later names the line that
 * recorded it (default on except under NODE_ENV=production; DTORCH_CAPTURE_STACKS overrides).
 * On, capture takes at most 2% of the JS thread's time: every op gets its site unless the
 * program records flat out, when a sample does. 'all' captures every op, each capture (V8's
 * stack capture) costing several times what recording the op does.
 */
export function setCaptureStacks(on: boolean | 'all'): void {
  engine().setCaptureStacks(on);
}

/** Starts peak tracking afresh: each device's peakBytes becomes its allocatedBytes now. */
export function resetPeakMemory(): void {
  engine().resetPeakMemory();
}

/** The worker thread of each device in use: its intra-op threads and compute kernels run. */
export function workers(): WorkerInfo[] {
  return engine().workers();
}

/** The engine's settings in force, as the DTORCH_* variables gave them (README's table): cpuDevices, fusion, ... */
export function nativeSettings(): NativeSettings {
  return engine().settings();
}

/** Resolves when every device has finished the work recorded so far. */
export function sync(): Promise<void> {
  return engine().sync();
}
