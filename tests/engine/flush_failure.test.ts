// A segment the engine could not hand to its controller (out of memory, say) must not leave a
// read waiting forever or throw where nobody can catch it: its reads reject, every later read
// of what it computed rejects with the same cause, the end-of-task flush throws nothing, and the
// process can exit. (The failure is injected with the core slice's failNextFlush.)
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { native } from '@dtorch/common';
import type { CoreSlice } from '@dtorch/core';
import { runNode } from './run_node.js';

const slice = () => native()['core'] as CoreSlice;

describe('a flush that fails', () => {
  it('rejects the read that asked for it, and every later read of what it held', async () => {
    const x = dt.tidy(() => dt.ones([4]).mul(3)); // recorded, not yet handed over (no garbage: the count below stays put)
    const numTensors = dt.memory().numTensors;
    slice().failNextFlush('std::bad_alloc');
    const rejection = await x.data().catch((e: unknown) => e);
    expect(rejection).toBeInstanceOf(dt.DTorchError);
    expect((rejection as dt.DTorchError).code).toBe('INTERNAL');
    expect((rejection as Error).message).toMatch(/could not be handed to the controller \(std::bad_alloc\)/);
    expect(dt.memory().numTensors).toBe(numTensors); // the tensors stay symbols until disposed
    // x was lost with the segment: reading it again, or anything made from it, says why
    await expect(x.data()).rejects.toThrow(/cannot be read: its work could not be handed to the controller \(std::bad_alloc\)/);
    const y = x.add(1).sum();
    await expect(y.data()).rejects.toThrow(/std::bad_alloc/);
    expect(() => x.dataSync()).toThrow(/std::bad_alloc/);
    dt.dispose([x, y]);
    // the engine goes on: new work runs and reads
    expect(Array.from((await dt.ones([2]).add(1).data()) as Float32Array)).toEqual([2, 2]);
  });

  it('rejects a sync in the dropped segment', async () => {
    dt.zeros([3]).dispose();
    slice().failNextFlush('std::bad_alloc');
    await expect(dt.sync()).rejects.toThrow(/before this sync could not be handed to the controller/);
    await dt.sync();
  });

  it('at the end of a JS task throws nothing; the read that depends on it rejects in the user try', async () => {
    const x = dt.arange(0, 4, 1, { dtype: 'float32' }).mul(2);
    slice().failNextFlush('std::bad_alloc');
    await new Promise((resolve) => setTimeout(resolve, 0)); // the end-of-task flush runs (and fails) here
    let caught: unknown;
    try {
      await x.data();
    } catch (e) {
      caught = e;
    }
    expect((caught as Error).message).toMatch(/std::bad_alloc/);
    x.dispose();
  });

  it('still frees on the workers what the dropped segment released', async () => {
    const mesh = new dt.DeviceMesh('cpu', [3]);
    const big = dt.zeros([1 << 20], { mesh }); // 4 MiB on cpu:3
    await big.data();
    const held = () => dt.memory().perDevice.find((d) => d.device === 'cpu:3')!.allocatedBytes;
    expect(held()).toBeGreaterThanOrEqual(4 << 20);
    big.dispose(); // a release node in the open segment
    slice().failNextFlush('std::bad_alloc');
    dt.ones([1], { mesh }).dispose(); // with its own release: flushed (and dropped) at the end of this task
    await new Promise((resolve) => setTimeout(resolve, 0));
    await dt.sync(); // the releases went with the next segment
    expect(held()).toBeLessThan(4 << 20);
  });

  it('lets the process exit when it happens at the end of the main task', () => {
    const script = `
      import * as dt from '@dtorch/api';
      import { native } from '@dtorch/common';
      const x = dt.ones([2]).add(1);
      native().core.failNextFlush('std::bad_alloc');
      try { await x.data(); } catch (e) { console.log('caught', e.code); }
      console.log('end');`;
    const r = runNode(script, {});
    expect(r.signal).toBeNull(); // not killed by the timeout: nothing kept it alive
    expect(r.stdout).toContain('caught INTERNAL');
    expect(r.stdout).toContain('end');
    expect(r.status).toBe(0);
    expect(r.ms).toBeLessThan(15_000);
  });
});

describe('DTORCH_SEGMENT_NODES', () => {
  const program = `
    import * as dt from '@dtorch/api';
    let x = dt.zeros([4]);
    for (let i = 0; i < 300; i++) x = x.add(1);
    try { console.log('read', (await x.data())[0]); } catch (e) { console.log('caught', e.code); }`;

  it('very high is refused when read, naming the variable, and the process exits', () => {
    const r = runNode(program, { DTORCH_SEGMENT_NODES: '1000000000000' });
    expect(r.signal).toBeNull();
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('Expected integer from 1 to 1000000 for environment variable DTORCH_SEGMENT_NODES but received "1000000000000"');
  });

  it('at its largest runs without asking for the memory of a full segment, and exits', () => {
    const r = runNode(program, { DTORCH_SEGMENT_NODES: '1000000' });
    expect(r.signal).toBeNull();
    expect(r.stderr).toBe('');
    expect(r.stdout).toContain('read 300');
    expect(r.status).toBe(0);
  });
});
