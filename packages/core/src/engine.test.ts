import { describe, expect, it } from 'vitest';
import { engine } from './engine.js';
import type { OpName } from './op_table.js';

// Records `full([n], value)` on mesh `meshId` straight through the engine client.
function recordFull(meshId: number, n: number, value: number): number {
  const e = engine();
  const a = e.args;
  let i = 0;
  a[i++] = meshId;
  a[i++] = 1;
  a[i++] = -1; // Replicate
  a[i++] = e.dtypeCode('float32');
  a[i++] = 1;
  a[i++] = n;
  a[i++] = value;
  e.record(e.opCode('full'), 0, i);
  return e.out[2]!;
}

describe('engine client', () => {
  it('exposes the native op and dtype tables', () => {
    const e = engine();
    expect(e.opCode('add')).toBeGreaterThanOrEqual(0);
    expect(e.dtypeName(e.dtypeCode('bfloat16'))).toBe('bfloat16');
    // a name the op table lacks is a compile error; one an older addon lacks throws at run time
    expect(() => e.opCode('nope' as OpName)).toThrow(/unknown op "nope"; this build has: .*add/);
  });

  it('starts work at the end of the JS task, without a read', async () => {
    const e = engine();
    const mesh = e.createMesh('cpu', [0], [1]);
    recordFull(mesh, 1 << 20, 1); // 4 MiB, recorded but never read
    const deadline = Date.now() + 10_000;
    // no fetch, no sync: only the end-of-task flush can make the worker allocate
    while (e.memory().perDevice[0]!.allocatedBytes < 4 << 20) {
      if (Date.now() > deadline) throw new Error('the recorded op never ran');
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(e.memory().perDevice[0]!.allocatedBytes).toBeGreaterThanOrEqual(4 << 20);
  });

  it('reads values through promises and blocking reads', async () => {
    const e = engine();
    const mesh = e.createMesh('cpu', [0], [1]);
    const id = recordFull(mesh, 3, 2.5);
    expect(Array.from((await e.fetch(id)) as Float32Array)).toEqual([2.5, 2.5, 2.5]);
    expect(Array.from(e.fetchSync(id) as Float32Array)).toEqual([2.5, 2.5, 2.5]);
  });
});
