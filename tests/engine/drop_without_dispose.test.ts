// A loop that drops its tensors without dispose(), as JS users write it, relies on the
// FinalizationRegistry to free them. Nothing DTorch keeps on the side (call sites of recorded
// ops above all) may hold a dropped tensor alive: after gc() only what the program holds is live.
import { afterAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';

const gc = (globalThis as { gc?: () => void }).gc;
// 256 KiB of float32: V8 does not see native memory, so until its next gc the loop holds every
// step's tensors (about 1 GB here); a bigger tensor would only make the test heavier
const shape = [256, 256];
const tensorBytes = 256 * 256 * 4;
const iterations = 2_000;

// gc() and macrotasks until the finalizers ran and their releases reached the engine.
async function collectDropped(bound: number): Promise<void> {
  for (let i = 0; i < 40; i++) {
    gc!();
    await new Promise((r) => setTimeout(r, 5));
    await dt.sync();
    if (i >= 3 && dt.memory().numTensors <= bound) return;
  }
}

// x_{n+1} = x_n / 2 + 1, each step dropping x_n and the intermediate x_n / 2
function dropLoop(): dt.Tensor {
  let x = dt.zeros(shape);
  for (let i = 0; i < iterations; i++) x = x.mul(0.5).add(1);
  return x;
}

describe.skipIf(!gc)('dropped tensors are freed by the garbage collector (needs --expose-gc)', () => {
  afterAll(() => dt.setCaptureStacks(true));

  it.each([
    ['on (the default)', true],
    ['all', 'all'],
    ['off', false],
  ] as const)('with call-site capture %s, a 2,000-step loop leaves only what it holds live', async (_name, capture) => {
    dt.setCaptureStacks(capture);
    await collectDropped(0);
    const before = dt.memory();
    const x = dropLoop();
    const held = 1; // x
    await collectDropped(before.numTensors + held);
    const after = dt.memory();
    // a few not yet collected at most (V8 may keep the newest ones a cycle longer)
    expect(after.numTensors - before.numTensors).toBeLessThanOrEqual(held + 4);
    expect(after.numBytes - before.numBytes).toBeLessThanOrEqual((held + 4) * tensorBytes);
    expect(((await x.data()) as Float32Array)[0]).toBeCloseTo(2, 5);
    x.dispose();
  });
});
