import { describe, expect, it } from 'vitest';
import * as dt from './index.js';

describe('tidy / keep / dispose / memory', () => {
  it('frees what was created inside except what is returned or kept', () => {
    const before = dt.memory().numTensors;
    let kept!: dt.Tensor;
    let inner!: dt.Tensor;
    const result = dt.tidy(() => {
      const a = dt.ones([3]);
      inner = a.add(1);
      kept = dt.keep(a.mul(2));
      return { out: inner.mul(3) };
    });
    expect(inner.isDisposed).toBe(true);
    expect(kept.isDisposed).toBe(false);
    expect(result.out.isDisposed).toBe(false);
    expect(dt.memory().numTensors).toBe(before + 2);
    dt.dispose([kept, result]);
    expect(dt.memory().numTensors).toBe(before);
  });

  it('moves returned tensors to the enclosing tidy', () => {
    const before = dt.memory().numTensors;
    let middle!: dt.Tensor;
    dt.tidy(() => {
      middle = dt.tidy(() => dt.ones([2]).add(1));
      expect(middle.isDisposed).toBe(false);
    });
    expect(middle.isDisposed).toBe(true);
    expect(dt.memory().numTensors).toBe(before);
  });

  it('frees on throw and refuses async functions', () => {
    const before = dt.memory().numTensors;
    expect(() =>
      dt.tidy(() => {
        dt.ones([2]);
        throw new Error('boom');
      }),
    ).toThrow('boom');
    expect(() => dt.tidy((async () => dt.ones([2])) as never)).toThrow('tidy(fn): fn must be synchronous');
    expect(dt.memory().numTensors).toBe(before);
  });

  it('releases tensors the program dropped without dispose(), once they are collected', async () => {
    const gc = (globalThis as { gc?: () => void }).gc;
    expect(gc, 'tests run with --expose-gc').toBeDefined();
    await dt.sync();
    const before = dt.memory().numTensors;
    (() => {
      for (let i = 0; i < 100; i++) dt.ones([4]);
    })();
    expect(dt.memory().numTensors).toBe(before + 100);
    for (let i = 0; i < 50 && dt.memory().numTensors > before; i++) {
      gc!();
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(dt.memory().numTensors).toBe(before);
  });

  it('keeps the value a tensor took over through set() when the set() temporaries are collected', async () => {
    const gc = (globalThis as { gc?: () => void }).gc!;
    const x = dt.zeros([4]);
    (() => {
      x.set(dt.slice(1, 2), dt.tensor([7])); // x adopts a new tensor object's value; that object is dropped
    })();
    for (let i = 0; i < 10; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(Array.from((await x.data()) as Float32Array)).toEqual([0, 7, 0, 0]);
  });

  it('leaves memory unchanged after 10,000 iterations of a loop inside tidy', async () => {
    let x = dt.keep(dt.zeros([16]));
    await dt.sync();
    const before = dt.memory();
    for (let i = 0; i < 10_000; i++) {
      const next = dt.tidy(() => x.add(1).mul(2).sub(x).relu());
      x.dispose();
      x = dt.keep(next);
    }
    await dt.sync();
    const after = dt.memory();
    expect(after.numTensors).toBe(before.numTensors);
    expect(after.numBytes).toBe(before.numBytes);
    expect(after.perDevice[0]!.allocatedBytes).toBe(before.perDevice[0]!.allocatedBytes);
    // x_{n+1} = relu(2(x+1) - x) = x + 2
    expect(await x.data()).toEqual(new Float32Array(16).fill(20_000));
  });
});
