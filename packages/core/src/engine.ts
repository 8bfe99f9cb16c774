// The client of the native engine, used from the one JS thread: it records ops (one N-API
// call each, arguments through the shared `args` buffer, which grows on demand), flushes the
// open segment at the end of the current JS task, and turns reads into typed arrays. Tensors here are plain
// ids; @dtorch/api builds the user-facing Tensor on top.
import { config, DTorchError, ErrorCode, log, native } from '@dtorch/common';
import { CallSites, type CaptureMode } from './call_sites.js';
import { EventLoopSpin } from './event_loop_spin.js';
import { dtypeNames, hostArrayFor, type DTypeName } from './host_arrays.js';
import type { OpName } from './op_table.js';
import type { ClusterSlice, CoreSlice, GraphStats, Fetched, HostArray, MemoryInfo, NativeSettings, OpInfo, PieceInfo, SignatureRowInfo, WorkerInfo } from './native_slice.js';

/** The kind of devices a mesh spans: CPU worker threads or CUDA GPUs. */
export type DeviceKind = 'cpu' | 'cuda';

// Room kept after any list a writer reserved, for the few fixed attributes written after it.
const argsTail = 16;

/**
 * The client of the native engine (one per process, from {@link engine}): records ops by code on
 * tensor ids, flushes at the end of each JS task, and reads values back as typed arrays.
 * `@dtorch/api`'s Tensor and ops are built on it; programs use those instead.
 */
export class Engine {
  /** Output metadata of the last record (the native `out` buffer; replaced when it grows). */
  out: Float64Array;
  private argsView: Float64Array;
  /** The op table of the loaded addon, by op name (frozen). */
  readonly ops: Readonly<Record<string, OpInfo>>;
  private readonly slice: CoreSlice;
  private readonly dtypeCodes: Record<string, number>;
  private readonly dtypeByCode: DTypeName[] = [];
  private readonly sites = newCallSites();
  // awaited syncs and reads keep the event loop turning while they are answered (DTORCH_EVENT_LOOP_SPIN_US)
  private readonly waits = new EventLoopSpin(config.eventLoopSpinUs);
  private flushQueued = false;
  // End of a JS task: nobody can catch here, so nothing may throw. The engine rejects the reads
  // that depend on a segment it could not hand over; what is left (a shut-down engine) is logged.
  private readonly flushNow = () => {
    this.flushQueued = false;
    try {
      this.slice.flush();
    } catch (err) {
      log.error(`the end-of-task flush failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  };

  constructor(slice: CoreSlice) {
    this.slice = slice;
    slice.settings(); // a malformed native setting (DTORCH_*) is refused here, at first use
    this.argsView = slice.args;
    this.out = slice.out;
    this.ops = Object.freeze(slice.ops());
    this.dtypeCodes = slice.dtypes();
    for (const name of dtypeNames) {
      const code = this.dtypeCodes[name];
      if (code === undefined) throw new DTorchError(ErrorCode.Internal, `the addon does not know dtype ${name}`);
      this.dtypeByCode[code] = name;
    }
    slice.setFlushThreshold(config.segmentNodes);
  }

  /** This engine's side of a cluster (the main node and worker node use it). */
  get cluster(): ClusterSlice {
    return this.slice.cluster;
  }

  /**
   * The op's code; throws UNKNOWN_OP naming the ops this build has (an addon older than the
   * op table it was compiled against).
   */
  opCode(name: OpName): number {
    const info = this.ops[name];
    if (!info) {
      throw new DTorchError(ErrorCode.UnknownOp, `unknown op "${name}"; this build has: ${Object.keys(this.ops).join(', ')}`);
    }
    return info.code;
  }

  /** The native code of dtype `name`. */
  dtypeCode(name: DTypeName): number {
    return this.dtypeCodes[name]!;
  }

  /** The dtype of native code `code`; throws UNKNOWN_DTYPE for a code the addon does not have. */
  dtypeName(code: number): DTypeName {
    const name = this.dtypeByCode[code];
    if (!name) throw new DTorchError(ErrorCode.UnknownDtype, `unknown native dtype code ${code}`);
    return name;
  }

  /** The shared argument buffer: input ids, then attributes. Writers of lists call reserveArgs first. */
  get args(): Float64Array {
    return this.argsView;
  }

  /**
   * `args` with room for `n` values and a few more after them (grown, with what was written so
   * far, when needed): an op may take any number of inputs and attributes.
   */
  reserveArgs(n: number): Float64Array {
    if (n + argsTail > this.argsView.length) this.argsView = this.slice.growArgs(n + argsTail);
    return this.argsView;
  }

  /**
   * Records op `code` with `numInputs` ids then `numAttrs` attributes already written to
   * `args`. Output metadata is then in `out`. Bad input throws here, at the caller's line.
   */
  record(code: number, numInputs: number, numAttrs: number): void {
    this.recorded(this.slice.record(code, numInputs, numAttrs));
  }

  /** Like record, for an op whose full value comes from host data (copied now). */
  recordData(code: number, numAttrs: number, data: HostArray, sourceDtype: DTypeName): void {
    this.recorded(this.slice.recordData(code, numAttrs, data, this.dtypeCode(sourceDtype)));
  }

  /** Records a redistribute of `id` to `placementCodes` on mesh `meshId` (output in `out`). */
  redistribute(id: number, meshId: number, placementCodes: number[]): void {
    this.recorded(this.slice.redistribute(id, meshId, placementCodes));
  }

  /** The steps a redistribute of `id` to `placementCodes` (same mesh) would take. */
  planRedistribute(id: number, placementCodes: number[]): string[] {
    return this.slice.planRedistribute(id, placementCodes);
  }

  /**
   * The placement rows op `code` has for the inputs and attributes written to `args` (as for
   * record); records nothing.
   */
  signatureRows(code: number, numInputs: number, numAttrs: number): SignatureRowInfo[] {
    return this.slice.signatureRows(code, numInputs, numAttrs);
  }

  /** Each rank's piece of tensor `id`: device, shape and offset. */
  layout(id: number): PieceInfo[] {
    return this.slice.layout(id);
  }

  // `grownOut`: the native side moved `out` to make room for many outputs.
  private recorded(grownOut: Float64Array | undefined): void {
    if (grownOut !== undefined) this.out = grownOut;
    this.queueFlush();
    this.sites.capture(this.out[0]!);
  }

  private queueFlush(): void {
    if (!this.flushQueued) {
      // end of the current JS task: hand the open segment to the controller
      this.flushQueued = true;
      queueMicrotask(this.flushNow);
      this.sites.mayHaveIdled(); // the first op of a task
    }
  }

  /** Keeps what is recorded from now on: the first run of a compiled call (dt.graph.compile). */
  beginTrace(): void {
    this.slice.beginTrace();
  }

  /**
   * Ends the trace begun by beginTrace, of a call on tensors `argumentIds` that returned
   * `outputIds`: the trace's id, or a sentence saying why the call cannot be replayed by copying
   * what it recorded.
   */
  endTrace(argumentIds: readonly number[], outputIds: readonly number[]): number | string {
    const args = this.reserveArgs(argumentIds.length + outputIds.length);
    argumentIds.forEach((id, i) => (args[i] = id));
    outputIds.forEach((id, i) => (args[argumentIds.length + i] = id));
    return this.slice.endTrace(argumentIds.length, outputIds.length);
  }

  /** Drops the trace begun by beginTrace (the call threw). */
  abortTrace(): void {
    this.slice.abortTrace();
  }

  /**
   * Records trace `id` again on tensors `argumentIds`, as running the call would have: the ids
   * of its `numOutputs` outputs, or undefined (nothing recorded) when the arguments do not fit
   * the trace or a tensor it reads from before the call was disposed.
   */
  replayTrace(id: number, argumentIds: readonly number[], numOutputs: number): number[] | undefined {
    const args = this.reserveArgs(Math.max(argumentIds.length, 2 + numOutputs));
    argumentIds.forEach((argId, i) => (args[i] = argId));
    if (!this.slice.replayTrace(id, argumentIds.length)) return undefined;
    this.queueFlush();
    this.sites.capture(args[0]!); // a failure inside names the compiled call
    const ids: number[] = [];
    for (let k = 0; k < args[1]!; k++) ids.push(args[2 + k]!);
    return ids;
  }

  /** Forgets trace `id` (its compiled function was collected). */
  dropTrace(id: number): void {
    this.slice.dropTrace(id);
  }

  /** Drops the engine's reference to tensor `id` (what dispose() does); its memory is freed once queued work that reads it ran. */
  release(id: number): void {
    this.slice.release(id);
  }

  /** What the controller recognised of the segments it lowered. */
  graphStats(): GraphStats {
    return this.slice.graphStats();
  }

  /** Recognising and replaying repeated segments on or off, for the segments recorded from now on. */
  setGraphs(on: boolean): void {
    this.slice.setGraphs(on);
  }

  /** The start or end of a step of a loop: what was recorded goes to the workers, and the next segments are cut the same way each step. */
  beginStep(): void {
    this.slice.beginStep();
  }

  /** The start of a top-level model call: a step boundary when the previous call (and what followed it) recorded 64 nodes or more. */
  beginCall(): void {
    this.slice.beginCall();
  }

  /** Hands the ops recorded so far to the workers now, rather than at the end of the JS task. */
  flush(): void {
    this.slice.flush();
  }

  /**
   * Creates a mesh of `kind` devices (`devices` laid out row-major in `shape`) and returns its id;
   * throws INVALID_MESH when they do not fit.
   */
  createMesh(kind: DeviceKind, devices: number[], shape: number[]): number {
    return this.slice.createMesh(kind === 'cpu' ? 0 : 1, devices, shape);
  }

  /** Reads the full value of tensor `id`; rejects with the failing op and its call site. */
  async fetch(id: number): Promise<HostArray> {
    try {
      return this.toHost(await this.waits.around(this.slice.fetch(id)));
    } catch (err) {
      throw this.withCallSite(err);
    }
  }

  /**
   * Reads the full value of tensor `id`, blocking the JS thread until it is computed; throws
   * TIMEOUT after DTORCH_READ_TIMEOUT_MS, and a kernel's failure with its call site.
   */
  fetchSync(id: number): HostArray {
    try {
      return this.toHost(this.slice.fetchSync(id, config.readTimeoutMs));
    } catch (err) {
      throw this.withCallSite(err);
    } finally {
      this.sites.mayHaveIdled(); // while it waited for the engine
    }
  }

  /** Resolves when every worker has run everything recorded so far. */
  async sync(): Promise<void> {
    await this.waits.around(this.slice.sync());
  }

  /** Live tensors and their bytes, in all and per device (as `tf.memory()`). */
  memory(): MemoryInfo {
    return this.slice.memory();
  }

  /** The native settings in force (DTORCH_* variables, read once). */
  settings(): NativeSettings {
    return this.slice.settings();
  }

  /** The engine's worker threads, one per device in use, with their threads and kernels run. */
  workers(): WorkerInfo[] {
    return this.slice.workers();
  }

  /** Starts each device's peak memory again from what it holds now (as `torch.cuda.reset_peak_memory_stats`). */
  resetPeakMemory(): void {
    this.slice.resetPeakMemory();
  }

  /**
   * Bounds the collective waits that start from now on (ms); 0 goes back to
   * DTORCH_COLLECTIVE_TIMEOUT_MS. For tests that time one collective out on purpose.
   */
  setCollectiveTimeout(ms: number): void {
    this.slice.setCollectiveTimeout(ms);
  }

  /** Call-site capture: on (within a time budget), 'all' (every op) or off; see DTORCH_CAPTURE_STACKS. */
  setCaptureStacks(on: boolean | 'all'): void {
    this.sites.setMode(captureMode(on), `dt.setCaptureStacks(${on})`);
  }

  private toHost(fetched: Fetched): HostArray {
    return hostArrayFor(this.dtypeName(fetched.dtype), fetched.buffer);
  }

  private withCallSite(err: unknown): unknown {
    // a kernel that failed, or a collective wait that ran out: both name the op that recorded it
    const failedOp = err instanceof DTorchError && (err.code === ErrorCode.KernelFailed || err.code === ErrorCode.Timeout);
    if (failedOp && err.seq !== undefined) {
      const where = this.sites.describe(err.seq);
      err.message = `${err.message}\n  recorded at:\n${where}`;
      err.stack = `${err.name}: ${err.message}`;
    }
    return err;
  }
}

function captureMode(on: boolean | 'all'): CaptureMode {
  return on === 'all' ? 'all' : on ? 'budget' : 'off';
}

// The process's call sites, capturing as DTORCH_CAPTURE_STACKS (or NODE_ENV=production) says.
function newCallSites(): CallSites {
  const sites = new CallSites('off');
  sites.setMode(captureMode(config.captureStacks), config.captureStacksOff);
  return sites;
}

let instance: Engine | undefined;

/** The process-wide engine (loads the addon on first use). */
export function engine(): Engine {
  if (!instance) {
    const slice = native()['core'] as CoreSlice;
    instance = new Engine(slice);
    // process.exit() runs 'exit' listeners, then C's exit(), whose static destructors tear down
    // the CUDA runtime: the engine stops first, while its workers can still free GPU memory
    process.once('exit', () => slice.shutdown());
  }
  return instance;
}
