// The controller's segment rewrites, seen from outside: dead nodes never run, and a released
// tensor is freed right after its last use rather than where the program released it.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';

const mesh = new dt.DeviceMesh('cpu', [0]);
const kernelsRun = () => dt.workers().find((w) => w.device === 'cpu:0')!.kernelsRun;
const device0 = () => dt.memory().perDevice.find((d) => d.device === 'cpu:0')!;

describe('segment rewrites', () => {
  it('drop nodes whose outputs are released unread in the same segment', async () => {
    const a = dt.ones([8], { mesh });
    await dt.sync();
    const start = kernelsRun();
    // one JS task, so one segment: mul and add are released by tidy and never read
    dt.tidy(() => {
      a.mul(2).add(1);
    });
    await dt.sync();
    expect(kernelsRun() - start).toBe(0);

    // the same ops with the result kept all run
    const kept = dt.tidy(() => a.mul(2).add(1));
    await dt.sync();
    expect(kernelsRun() - start).toBe(2);
    expect(await kept.data()).toEqual(new Float32Array(8).fill(3));
    dt.dispose([a, kept]); // explicit, so no collection changes the next test's numbers
  });

  it('free a released tensor right after its last use', async () => {
    const n = 1 << 20;
    const mib4 = 4 * n; // one float32 tensor; float64 ones are twice that
    await dt.sync();
    dt.resetPeakMemory();
    const base = device0().allocatedBytes;
    // casts have no in-place form, so every output gets a buffer of its own
    const a = dt.ones([n], { mesh });
    const b = a.to('float64'); // last use of a
    const c = dt.ones([n], { mesh });
    const d = c.to('float64'); // last use of c
    a.dispose(); // released only now, after c and d were recorded
    c.dispose();
    expect(await b.sum().add(d.sum()).item()).toBe(2 * n);
    const peak = device0().peakBytes - base;
    // a freed before c is made: at most b, c and d at once (20 MiB); kept to its release
    // point, a would be alive too (24 MiB)
    expect(peak).toBeGreaterThanOrEqual(5 * mib4);
    expect(peak).toBeLessThan(6 * mib4);
    dt.dispose([b, d]);
  });

  it('write an elementwise result into the buffer of an input that dies there', async () => {
    const n = 1 << 20;
    const bytes = 4 * n;
    await dt.sync();
    dt.resetPeakMemory();
    const base = device0().allocatedBytes;
    // after a wait segments start short (32 nodes, doubling to 256): record 224 nodes (a zeros,
    // 111 adds, their 112 releases) so that the loop starts a 256-node segment and each add
    // meets the release of its input there
    dt.tidy(() => {
      const one = dt.zeros([1], { mesh });
      for (let i = 0; i < 111; i++) one.add(i);
    });
    let x = dt.zeros([n], { mesh });
    for (let i = 0; i < 10; i++) {
      const next = dt.tidy(() => x.add(1).mul(2)); // x and the add's output both die here
      x.dispose();
      x = next;
    }
    const total = x.sum();
    expect(await total.item()).toBe(2046 * n); // x_{i+1} = 2 (x_i + 1)
    // without reuse, each step holds the old and the new buffer at once
    expect(device0().peakBytes - base).toBeLessThan(2 * bytes);
    dt.dispose([x, total]);
  });

  it('never write into a buffer that a read handed to JS', async () => {
    const x = dt.ones([4], { mesh });
    const host = await x.data(); // shares the buffer with x's blob
    const y = x.add(1); // x dies here, but its buffer is not free to reuse
    x.dispose();
    expect(await y.data()).toEqual(new Float32Array([2, 2, 2, 2]));
    expect(host).toEqual(new Float32Array([1, 1, 1, 1]));
    y.dispose();
  });
});
