// Forward hooks: a pre-hook's arguments and a hook's output replace forward's, an around hook
// runs in forward's place (calling it or not), in the order registered, whether forward is called directly or through call(); remove() takes a hook off and
// the last one removed leaves the module as it was; bad hooks are DTorchErrors.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as nn from './index.js';

class Affine extends nn.Module {
  forward(x: dt.Tensor, scale = 1): dt.Tensor {
    return x.mul(scale).add(1);
  }
}

const values = async (t: dt.Tensor) => [...((await t.data()) as Float32Array)];

describe('forward hooks', () => {
  it('replace the arguments and the output, in the order registered, on forward and call()', async () => {
    const m = new Affine();
    const x = dt.tensor([1, 2], { dtype: 'float32' });
    const seen: string[] = [];
    const handles = [
      m.registerForwardPreHook((module, args) => {
        seen.push(`pre 1 on ${module.constructor.name}`);
        return [args[0], 10];
      }),
      m.registerForwardPreHook(() => void seen.push('pre 2')),
      m.registerForwardHook((_, args, output) => {
        seen.push(`post with scale ${String(args[1])}`);
        return (output as dt.Tensor).neg();
      }),
    ];
    expect(await values(m.forward(x))).toEqual([-11, -21]);
    expect(seen).toEqual(['pre 1 on Affine', 'pre 2', 'post with scale 10']);
    expect(await values(m.call(x))).toEqual([-11, -21]);
    expect(await values(m.compile().call(x)), 'a compiled call runs them too').toEqual([-11, -21]);
    handles[0]!.remove();
    expect(await values(m.forward(x, 2))).toEqual([-3, -5]);
    for (const h of handles) h.remove();
    handles[1]!.remove(); // a second remove() does nothing
    expect(Object.hasOwn(m, 'forward'), 'the class forward back').toBe(false);
    expect(await values(m.forward(x, 2))).toEqual([3, 5]);
    dt.dispose(x);
  });

  it('around hooks run in place of forward, after the pre-hooks and before the hooks, the later outside the earlier', async () => {
    const m = new Affine();
    const x = dt.tensor([1, 2], { dtype: 'float32' });
    const seen: string[] = [];
    let skip = false;
    const handles = [
      m.registerForwardPreHook((_, args) => [args[0], 2]),
      // skips forward when told, with an output of its own
      m.registerForwardAroundHook((module, forward, args) => {
        seen.push(`inner on ${module.constructor.name} with scale ${String(args[1])}`);
        return skip ? (args[0] as dt.Tensor).mul(0) : forward(...args);
      }),
      m.registerForwardAroundHook((_, forward, args) => {
        seen.push('outer');
        return (forward(...args) as dt.Tensor).mul(10);
      }),
      m.registerForwardHook((_, __, output) => (output as dt.Tensor).add(1)),
    ];
    expect(await values(m.forward(x))).toEqual([31, 51]);
    expect(seen).toEqual(['outer', 'inner on Affine with scale 2']);
    skip = true;
    expect(await values(m.call(x)), 'forward skipped').toEqual([1, 1]);
    handles[2]!.remove();
    expect(await values(m.forward(x))).toEqual([1, 1]);
    for (const h of handles) h.remove();
    expect(Object.hasOwn(m, 'forward'), 'the class forward back').toBe(false);
    expect(() => m.registerForwardAroundHook(42 as never)).toThrow(/registerForwardAroundHook hook/);
    dt.dispose(x);
  });

  it('wrap a forward replaced by hand, and give it back', async () => {
    const m = new Affine();
    const x = dt.tensor([1], { dtype: 'float32' });
    const byHand = (t: dt.Tensor) => t.mul(3);
    m.forward = byHand;
    const handle = m.registerForwardHook((_, __, output) => (output as dt.Tensor).add(1));
    expect(await values(m.forward(x))).toEqual([4]);
    handle.remove();
    expect(m.forward).toBe(byHand);
    dt.dispose(x);
  });

  it('taken off, leave a wrapper a caller kept passing straight through', async () => {
    const m = new Affine();
    const x = dt.tensor([1], { dtype: 'float32' });
    const first = m.registerForwardHook((_, __, output) => (output as dt.Tensor).mul(2));
    const kept = m.forward.bind(m);
    first.remove();
    const second = m.registerForwardHook((_, __, output) => (output as dt.Tensor).mul(5));
    expect(await values(kept(x)), 'the kept wrapper runs no hook').toEqual([2]);
    expect(await values(m.forward(x))).toEqual([10]);
    second.remove();
    dt.dispose(x);
  });

  it('refuse a hook that is not a function, and a pre-hook that returns something not an array', () => {
    const m = new Affine();
    const x = dt.tensor([1], { dtype: 'float32' });
    expect(() => m.registerForwardPreHook('scale' as never)).toThrow(dt.DTorchError);
    expect(() => m.registerForwardHook(undefined as never)).toThrow(/registerForwardHook hook/);
    expect(Object.hasOwn(m, 'forward'), 'a refused hook changes nothing').toBe(false);
    const handle = m.registerForwardPreHook(() => 2 as never);
    expect(() => m.forward(x)).toThrow(/Affine: a forward pre-hook returned number; return the arguments as an array, or nothing/);
    handle.remove();
    dt.dispose(x);
  });
});
