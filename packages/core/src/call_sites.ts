// Call sites of recorded ops, so that a kernel failing later on a worker can name the JS
// line that recorded it, kept in a ring keyed by record sequence (the newest `capacity` ops).
//
// Two costs shape this file (bench/overhead measures the second: bench/results/overhead):
// - V8's structured frames hold each call's function and receiver (the user's tensors) until
//   the stack is formatted, so a kept, unformatted capture keeps dropped tensors from ever
//   being collected. Each capture is read at once into plain data (file, line, column).
// - A capture from optimized code, and reading it, cost several times what recording the op
//   does: V8 decodes the deoptimization data of the user's frame to find the inlined calls, and
//   a limit of 1 frame costs nearly as much as 10. No cheaper key tells one call site from
//   another, so identical sites cannot be told apart before paying for this.
//   The default ('budget') therefore spends at most `budgetFraction` of the JS thread's wall
//   time capturing, with a burst of `burstMs` saved up while idle: every op gets its site while
//   the program records at a normal pace or waits on the engine, and a loop that records flat
//   out gets a sample. 'all' captures every op.

import { findSourceMap, type SourceOrigin } from 'node:module';

/**
 * How call sites of recorded ops are captured: 'off' never, 'budget' within a share of the JS
 * thread's time (the default; DTORCH_CAPTURE_STACKS=1), 'all' for every op (DTORCH_CAPTURE_STACKS=all).
 */
export type CaptureMode = 'off' | 'budget' | 'all';

/** One user frame, as plain data: holds no function, receiver or tensor. */
interface Frame {
  name: string | null;
  file: string;
  line: number;
  column: number;
}

interface Collected {
  user: Frame[];
  first: Frame[];
  /** Frames V8 captured. */
  total: number;
}

const noFrames: Collected = { user: [], first: [], total: 0 };

// Frames inside DTorch's own packages (and Node's) are left out of what the user sees.
const internalFrame = /[\\/](packages[\\/](common|external|core|api|nn|hf)[\\/](src|dist)|node_modules[\\/]@dtorch)[\\/]|^node:/;

/** Share of the JS thread's wall time the default mode may spend capturing. */
const budgetFraction = 0.02;
/** Capture time that idle time can save up (about 500 ops' sites after a pause). */
const burstMs = 2;
/** The most one capture is charged: a longer one was a gc or the thread being preempted. */
const maxChargeMs = 0.1;
/** While out of budget, the clock is read once per this many ops (and after the JS thread may have idled). */
const checkEvery = 32;
/** Frames captured first (V8's default); deeper DTorch stacks (nn modules) retry with more. */
const shallowFrames = 10;
const deepFrames = 64;
/** User frames kept per op. */
const userFramesKept = 3;

/**
 * The JS call sites of recently recorded ops, by record sequence number, so that an error from
 * a kernel that ran later on a worker can say which line of the program recorded it.
 */
export class CallSites {
  private readonly seqs: Float64Array;
  private readonly sites: (Frame[] | undefined)[];
  private newestSeq = -1;
  private credit = burstMs;
  private lastRefill: number;
  private untilCheck = 0;
  private readonly internalFiles = new Map<string, boolean>();
  private collected = noFrames;
  private offBecause = 'DTORCH_CAPTURE_STACKS=0';
  // Error.prepareStackTrace while capturing: V8 hands it the structured frames
  private readonly collect = (_err: Error, callSites: NodeJS.CallSite[]): string => {
    this.collected = this.frameData(callSites);
    return '';
  };

  constructor(
    private mode: CaptureMode,
    private readonly capacity = 4096,
    private readonly isInternal: RegExp = internalFrame,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.seqs = new Float64Array(capacity).fill(-1);
    this.sites = new Array<Frame[] | undefined>(capacity);
    this.lastRefill = now();
  }

  /** `offBecause` names what turned capture off, for describe() (default: DTORCH_CAPTURE_STACKS=0). */
  setMode(mode: CaptureMode, offBecause = 'DTORCH_CAPTURE_STACKS=0'): void {
    this.mode = mode;
    this.offBecause = offBecause;
  }

  /** Captures the call site of the op just recorded as `seq`, if the mode (and in 'budget', the budget) allows. */
  capture(seq: number): void {
    if (this.mode === 'off') return;
    this.newestSeq = seq;
    if (this.mode === 'all') {
      this.keep(seq, this.captureFrames());
      return;
    }
    if (this.credit <= 0 && !this.refilled()) return;
    const start = this.now();
    this.keep(seq, this.captureFrames());
    this.credit -= Math.min(maxChargeMs, this.now() - start);
  }

  /** The JS thread may have been idle (a new task records, a blocking read returned): the next op checks the budget. */
  mayHaveIdled(): void {
    this.untilCheck = 0;
  }

  /** The user's frames of the call that recorded `seq`, or a note saying why there are none. */
  describe(seq: number): string {
    const slot = seq % this.capacity;
    const frames = this.seqs[slot] === seq ? this.sites[slot] : undefined;
    if (frames) return frames.map(formatFrame).join('\n');
    if (this.mode === 'off') return `    (call sites are not captured: ${this.offBecause}; DTORCH_CAPTURE_STACKS=1 captures them)`;
    if (this.newestSeq - seq >= this.capacity || this.newestSeq < seq) {
      return `    (op #${seq} was recorded too long ago for its call site to be kept)`;
    }
    return (
      `    (op #${seq} was recorded in a busy stretch, where DTorch keeps call-site capture under ` +
      `${budgetFraction * 100}% of the JS thread's time; DTORCH_CAPTURE_STACKS=all captures every op)`
    );
  }

  /** Adds the budget earned since the last refill; checks the clock once per `checkEvery` ops. */
  private refilled(): boolean {
    if (--this.untilCheck > 0) return false;
    this.untilCheck = checkEvery;
    const t = this.now();
    this.credit = Math.min(burstMs, this.credit + budgetFraction * (t - this.lastRefill));
    this.lastRefill = t;
    return this.credit > 0;
  }

  private keep(seq: number, frames: Frame[]): void {
    const slot = seq % this.capacity;
    this.seqs[slot] = seq;
    this.sites[slot] = frames;
  }

  // Captures the stack above capture() and formats it at once (see the top of the file).
  private captureFrames(): Frame[] {
    const prepare = Error.prepareStackTrace;
    const limit = Error.stackTraceLimit;
    Error.prepareStackTrace = this.collect;
    try {
      let frames = this.captureWithLimit(shallowFrames);
      if (frames.user.length === 0 && frames.total === shallowFrames) frames = this.captureWithLimit(deepFrames);
      return frames.user.length > 0 ? frames.user : frames.first;
    } finally {
      Error.prepareStackTrace = prepare as typeof Error.prepareStackTrace;
      Error.stackTraceLimit = limit;
    }
  }

  private captureWithLimit(limit: number): Collected {
    const holder: { stack?: string } = {};
    Error.stackTraceLimit = limit;
    Error.captureStackTrace(holder, CallSites.prototype.capture);
    void holder.stack; // runs collect
    const collected = this.collected;
    this.collected = noFrames;
    return collected;
  }

  // The first frames outside DTorch, and the first frames of all in case there are none (an op
  // DTorch recorded on its own).
  private frameData(callSites: NodeJS.CallSite[]): Collected {
    const user: Frame[] = [];
    for (const site of callSites) {
      const file = site.getFileName() ?? '<anonymous>';
      if (this.internal(file)) continue;
      user.push(frameOf(site, file));
      if (user.length === userFramesKept) break;
    }
    const first = user.length > 0 ? [] : callSites.slice(0, userFramesKept).map((site) => frameOf(site, site.getFileName() ?? '<anonymous>'));
    return { user, first, total: callSites.length };
  }

  private internal(file: string): boolean {
    let internal = this.internalFiles.get(file);
    if (internal === undefined) {
      internal = this.isInternal.test(file);
      if (this.internalFiles.size >= 10_000) this.internalFiles.clear(); // generated code can name many files
      this.internalFiles.set(file, internal);
    }
    return internal;
  }
}

function frameOf(site: NodeJS.CallSite, file: string): Frame {
  const fn = site.getFunctionName();
  const type = fn && !site.isToplevel() ? site.getTypeName() : null;
  return { name: type ? `${type}.${fn}` : fn, file, line: site.getLineNumber() ?? 0, column: site.getColumnNumber() ?? 0 };
}

// As V8 prints a frame; through the file's source map where Node uses them (--enable-source-maps),
// as its own stack traces would be.
function formatFrame(f: Frame): string {
  let { file, line, column } = f;
  const origin: Partial<SourceOrigin> = (process.sourceMapsEnabled && findSourceMap(file)?.findOrigin(line, column)) || {};
  if (origin.fileName !== undefined) ({ fileName: file, lineNumber: line = 0, columnNumber: column = 0 } = origin);
  const where = `${file}:${line}:${column}`;
  return f.name ? `    at ${f.name} (${where})` : `    at ${where}`;
}
