import { mkdtempSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CallSites } from './call_sites.js';

function recordFromUserCode(sites: CallSites, seq: number): void {
  sites.capture(seq);
}

// A method call, as `x.add(1)` is: V8's structured frames hold its receiver.
class UserTensor {
  constructor(readonly payload: Float64Array) {}
  record(sites: CallSites, seq: number): void {
    sites.capture(seq);
  }
}

function nested(sites: CallSites, seq: number, depth: number): void {
  if (depth === 0) sites.capture(seq);
  else nested(sites, seq, depth - 1);
}

const notCaptured = /^ {4}\(op #\d+/;

describe('CallSites', () => {
  it('returns the frames of the call that recorded a sequence number', () => {
    const sites = new CallSites('all', 8, /node_modules/);
    recordFromUserCode(sites, 3);
    const text = sites.describe(3);
    expect(text).toMatch(/^ {4}at recordFromUserCode \(.*call_sites\.test\.ts:\d+:\d+\)/);
    expect(text).not.toContain('node_modules');
  });

  it("skips DTorch's frames, however deep, to the first frame outside", () => {
    const sites = new CallSites('all', 8, /call_sites\.test\.ts/); // this file plays DTorch
    nested(sites, 1, 20);
    const text = sites.describe(1);
    expect(text).toMatch(/^ {4}at /);
    expect(text).not.toContain('call_sites.test.ts');
  });

  it("names the original source where Node uses source maps, as Node's own stack traces do", () => {
    // compiled.js line 2 comes from original.ts line 40 (mappings: line 2, column 0 -> source 0, line 39, column 0)
    const map = { version: 3, sources: ['original.ts'], names: [], mappings: ';AAuCA' };
    const dir = mkdtempSync(join(tmpdir(), 'dtorch-call-sites-'));
    const compiled = join(dir, 'compiled.js');
    writeFileSync(
      compiled,
      `'use strict';\nmodule.exports = function recordHere(sites, seq) { sites.capture(seq); };\n` +
        `//# sourceMappingURL=data:application/json;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}\n`,
    );
    const enabled = process.sourceMapsEnabled;
    process.setSourceMapsEnabled(true);
    try {
      const recordHere = createRequire(import.meta.url)(compiled) as (sites: CallSites, seq: number) => void;
      const sites = new CallSites('all', 8, /node_modules/);
      recordHere(sites, 1);
      expect(sites.describe(1)).toMatch(/^ {4}at recordHere \(.*original\.ts:40:\d+\)/);
    } finally {
      process.setSourceMapsEnabled(enabled);
    }
  });

  it('says when a site is too old to be kept, or when capture is off', () => {
    const sites = new CallSites('all', 4);
    recordFromUserCode(sites, 1);
    recordFromUserCode(sites, 5); // same slot as 1
    expect(sites.describe(1)).toContain('recorded too long ago');
    const off = new CallSites('off', 4);
    off.capture(2);
    expect(off.describe(2)).toContain('DTORCH_CAPTURE_STACKS=0');
    off.setMode('off', 'NODE_ENV=production');
    expect(off.describe(2)).toContain('not captured: NODE_ENV=production; DTORCH_CAPTURE_STACKS=1 captures them');
  });

  it('keeps no reference to what the recording call held (its receiver, the user tensor)', async () => {
    const gc = (globalThis as { gc?: () => void }).gc!;
    const sites = new CallSites('all', 8, /node_modules/);
    let collected = false;
    const registry = new FinalizationRegistry(() => (collected = true));
    (() => {
      const t = new UserTensor(new Float64Array(16));
      registry.register(t, 0);
      t.record(sites, 1);
    })();
    for (let i = 0; i < 20 && !collected; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 0));
    }
    expect(collected).toBe(true);
    expect(sites.describe(1)).toMatch(/^ {4}at (UserTensor\.)?record \(.*call_sites\.test\.ts/);
  });

  it('by default spends at most 2% of the time on capturing, plus a 2 ms burst, and says which sites it skipped', () => {
    // a fake clock on which each op takes 1 µs to record and each reading 2 µs, so that a
    // capture (read before and after) is charged 2 µs
    let t = 0;
    const sites = new CallSites('budget', 1 << 16, /node_modules/, () => (t += 0.002));
    const recordUntil = (end: number, from: number) => {
      for (let seq = from; seq < end; seq++) {
        t += 0.001;
        sites.capture(seq);
      }
    };
    const captured = (from: number, to: number) => {
      let n = 0;
      for (let seq = from; seq < to; seq++) if (!notCaptured.test(sites.describe(seq))) n++;
      return n;
    };
    recordUntil(20_000, 0);
    // the burst: 2 ms of captures, every op
    expect(captured(0, 1000)).toBe(1000);
    // then 2% of the time
    const spentMs = captured(0, 20_000) * 0.002;
    expect(spentMs).toBeLessThanOrEqual(2 + 0.02 * t + 0.002);
    expect(spentMs).toBeGreaterThan(0.9 * (2 + 0.02 * t));
    const skipped = [...Array(20_000).keys()].find((seq) => notCaptured.test(sites.describe(seq)))!;
    expect(sites.describe(skipped)).toContain('busy stretch');
    expect(sites.describe(skipped)).toContain('DTORCH_CAPTURE_STACKS=all');
    // after a pause (the engine says when the thread may have idled), every op gets its site again
    t += 1000;
    sites.mayHaveIdled();
    recordUntil(20_500, 20_000);
    expect(captured(20_000, 20_500)).toBe(500);
  });
});
