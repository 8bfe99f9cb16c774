import { describe, expect, it } from 'vitest';
import * as dt from './index.js';

describe('Tensor', () => {
  it('infers shape and dtype at record time', () => {
    const x = dt.tensor([[1, 2, 3], [4, 5, 6]]);
    const y = x.matmul(dt.ones([3, 5])).relu();
    expect(y.shape).toEqual([2, 5]);
    expect(y.dtype).toBe('float32');
    expect(y.ndim).toBe(2);
    expect(y.numel).toBe(10);
    expect(String(y.placements)).toBe('R');
    expect(y.toString()).toBe("Tensor(shape=[2, 5], dtype=float32, placements=[R], mesh=DeviceMesh('cpu', [0]))");
  });

  it('reads values as typed arrays, nested arrays and scalars', async () => {
    const x = dt.tensor([[1.5, 2], [3, 4]]);
    expect(await x.data()).toEqual(new Float32Array([1.5, 2, 3, 4]));
    expect(await x.array()).toEqual([[1.5, 2], [3, 4]]);
    expect(x.dataSync()).toEqual(new Float32Array([1.5, 2, 3, 4]));
    expect(await x.sum().item()).toBe(10.5);
    expect(dt.tensor([3n, 4n]).dataSync()).toEqual(new BigInt64Array([3n, 4n]));
    expect(await dt.tensor([true, false]).array()).toEqual([true, false]);
    expect(await dt.tensor([1, 2], { dtype: 'int64' }).array()).toEqual([1, 2]);
    expect(await dt.tensor(new Int32Array([7, 8, 9, 10]), { shape: [2, 2] }).array()).toEqual([[7, 8], [9, 10]]);
    expect(await dt.tensor([0.5, 1.25], { dtype: 'bfloat16' }).data()).toEqual(new Float32Array([0.5, 1.25]));
    expect(await dt.tensor(2.5).item()).toBe(2.5);
    await expect(x.item()).rejects.toThrow('item(): Tensor(shape=[2, 2], dtype=float32, placements=[R]) has 4 elements');
  });

  it('takes large JS numbers as floats in where(): float32 lowest into a bfloat16 tensor', async () => {
    const x = dt.tensor([1, 2], { dtype: 'bfloat16' });
    const y = dt.where(dt.tensor([true, false]), x, -3.3895313892515355e38);
    expect(y.dtype).toBe('bfloat16');
    expect(await y.data()).toEqual(new Float32Array([1, -3.3895313892515355e38]));
    const z = dt.where(dt.tensor([false, true]), -3.4028234663852886e38, dt.tensor([1, 2]));
    expect(await z.data()).toEqual(new Float32Array([1, -3.4028234663852886e38]));
  });

  it('assigns with set(): the tensor refers to its new value, and nothing leaks', async () => {
    const x = dt.zeros([2, 3]);
    const column = dt.tensor([1, 2]);
    await dt.sync();
    const before = dt.memory().numTensors;
    expect(x.set(1, dt.slice(1), 5)).toBe(x);
    expect(await x.array()).toEqual([[0, 0, 0], [0, 5, 5]]);
    x.set('...', 0, column);
    expect(await x.array()).toEqual([[1, 0, 0], [2, 5, 5]]);
    expect(dt.memory().numTensors).toBe(before);
    const rows = dt.tensor([1], { dtype: 'int64' });
    x.set(rows, 9);
    expect(await x.array()).toEqual([[1, 0, 0], [9, 9, 9]]);
    x.set(dt.slice(), dt.tensor([0, 2], { dtype: 'int64' }), dt.tensor([[3, 4], [5, 6]]));
    expect(await x.array()).toEqual([[3, 0, 4], [5, 9, 6]]);
    expect(() => x.set(null, 1)).toThrow('not null');
  });

  it('throws TENSOR_DISPOSED when a disposed tensor is used', () => {
    const x = dt.ones([2]);
    x.dispose();
    expect(x.isDisposed).toBe(true);
    expect(() => x.add(1)).toThrow(expect.objectContaining({ code: 'TENSOR_DISPOSED' }));
    expect(() => x.dataSync()).toThrow(/was disposed and cannot be used/);
    x.dispose(); // twice is harmless
  });

  it('works with `using` through Symbol.dispose', () => {
    let escaped: dt.Tensor;
    {
      using t = dt.zeros([4]);
      escaped = t;
      expect(t.isDisposed).toBe(false);
    }
    expect(escaped.isDisposed).toBe(true);
  });

  it('takes arange\'s options after however many numbers, as torch.arange(end, device=...)', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0]);
    for (const [t, want] of [
      [dt.arange(4, { mesh, dtype: 'float32' }), [0, 1, 2, 3]],
      [dt.arange(2, 5, { mesh }), [2, 3, 4]],
      [dt.arange(0, 6, 2, { mesh }), [0, 2, 4]],
    ] as const) {
      expect(t.mesh).toBe(mesh);
      expect(await t.array()).toEqual(want);
    }
    expect(dt.arange(4, { dtype: 'float32' }).dtype).toBe('float32');
    expect(() => dt.arange(4, 'x' as unknown as number)).toThrow(/arange end/);
  });

  it('validates creation arguments with one message format', () => {
    expect(() => dt.zeros([2, -1])).toThrow('Expected shape (array of non-negative integers) for zeros shape but received [2, -1] of type array');
    expect(() => dt.zeros([2], { dtype: 'float' as never })).toThrow(
      'Expected one of float32, float16, bfloat16, float64, int64, int32, int16, int8, uint8, bool, float8_e4m3fn, float8_e5m2 for zeros dtype but received "float"',
    );
    expect(() => dt.tensor([[1, 2], [3]])).toThrow('tensor: ragged data: data[1] has 1 entries but 2 were expected');
    expect(() => dt.tensor([1, 2, 3], { shape: [2, 2] })).toThrow('tensor: data has 3 elements but shape [2, 2] needs 4');
    expect(() => dt.tensor(new Uint16Array(2) as never)).toThrow(/received Uint16Array/);
    expect(() => dt.zeros([2], { placements: [dt.Replicate(), dt.Replicate()] })).toThrow(
      'zeros: got 2 placement(s) for a 1-d mesh; give one placement per mesh dim',
    );
    expect(() => dt.randn([2], { dtype: 'int32' })).toThrow('randn: random values need a floating dtype');
  });
});
