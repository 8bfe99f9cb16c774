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
    const n = 1 << 20; // 4 MiB per float32 tensor
    const bytes = 4 * n;
    await dt.sync();
    dt.resetPeakMemory();
    const base = device0().allocatedBytes;
    const a = dt.ones([n], { mesh });
    const b = a.mul(2); // last use of a
    const c = dt.ones([n], { mesh });
    const d = c.add(b);
    a.dispose(); // released after c and d were recorded, freed before c is made
    b.dispose();
    c.dispose();
    const total = d.sum();
    expect(await total.item()).toBe(3 * n);
    total.dispose();
    const peak = device0().peakBytes - base;
    // with a kept until its release point, a, b, c and d would all be alive at once
    expect(peak).toBeGreaterThanOrEqual(3 * bytes);
    expect(peak).toBeLessThan(4 * bytes);
    await dt.sync();
    expect(device0().allocatedBytes - base).toBe(bytes); // d alone
    d.dispose();
  });
});
