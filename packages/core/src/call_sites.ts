// Call sites of recorded ops, so that a kernel failing later on a worker can name the JS
// line that recorded it. Captured per op (3-10 µs, V8's stack capture; DTORCH_CAPTURE_STACKS=0 turns it
// off) into a ring keyed by record sequence; the newest `capacity` ops are kept.

interface Site {
  stack?: string;
}

// Frames inside DTorch's own packages are left out of what the user sees.
const internalFrame = /[\\/](packages[\\/](common|external|core|api|nn|hf)[\\/](src|dist)|node_modules[\\/]@dtorch)[\\/]/;

export class CallSites {
  private readonly seqs: Float64Array;
  private readonly sites: (Site | undefined)[];

  constructor(
    private enabled: boolean,
    private readonly capacity = 4096,
    private readonly isInternal: RegExp = internalFrame,
  ) {
    this.seqs = new Float64Array(capacity);
    this.sites = new Array<Site | undefined>(capacity);
  }

  setEnabled(on: boolean): void {
    this.enabled = on;
  }

  capture(seq: number): void {
    if (!this.enabled) return;
    const site: Site = {};
    Error.captureStackTrace(site, CallSites.prototype.capture);
    const slot = seq % this.capacity;
    this.seqs[slot] = seq;
    this.sites[slot] = site;
  }

  /** The user's frames of the call that recorded `seq`, or a note saying why there are none. */
  describe(seq: number): string {
    if (!this.enabled) return '    (call sites are not captured: DTORCH_CAPTURE_STACKS=0)';
    const slot = seq % this.capacity;
    const site = this.sites[slot];
    if (this.seqs[slot] !== seq || !site?.stack) {
      return `    (op #${seq} was recorded too long ago for its call site to be kept)`;
    }
    const frames = site.stack.split('\n').slice(1);
    const user = frames.filter((f) => !this.isInternal.test(f));
    return (user.length > 0 ? user : frames).join('\n');
  }
}
