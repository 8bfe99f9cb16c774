// Bad input fails at the user's call with a DTorchError, and a call that throws changes nothing:
// the cases of issue 14 (numbers that used to wrap or be cut, options of the wrong type, errors
// that came only when a value was read), each with PyTorch's answer where it gives one.
// tests/fuzz/bad_arguments.test.ts spoils every op this way; these name the known cases.
import { describe, expect, it } from 'vitest';
import * as dt from '../index.js';

const F = dt.F;

// `call(inputs)` throws a DTorchError with `code` (and `message` in it) and leaves no tensor
// behind; the inputs are made first, so that only what the call made is counted.
function refused<T>(inputs: () => T, call: (inputs: T) => unknown, code: string, message?: string | RegExp): void {
  const made = inputs();
  const before = dt.memory().numTensors;
  let thrown: unknown;
  try {
    call(made);
  } catch (err) {
    thrown = err;
  }
  expect(thrown, 'the call returned').toBeInstanceOf(dt.DTorchError);
  expect((thrown as dt.DTorchError).code).toBe(code);
  if (message !== undefined) expect((thrown as Error).message).toMatch(message);
  expect(dt.memory().numTensors, 'tensors left behind').toBe(before);
}
const none = () => undefined;

describe('numeric arguments are checked before they reach native code', () => {
  it('narrow counts a negative start from the end and refuses a length past the end, as torch.narrow', async () => {
    const x = dt.arange(4);
    expect(await x.narrow(0, -1, 1).array()).toEqual([3]);
    expect(await x.narrow(0, -4, 2).array()).toEqual([0, 1]);
    expect(await x.narrow(0, 4, 0).array()).toEqual([]);
    refused(none, () => x.narrow(0, 2, 3), 'INVALID_ARGUMENT', 'Expected integer in [0, 2] for narrow length but received 3 of type number');
    refused(none, () => x.narrow(0, -5, 1), 'INVALID_ARGUMENT', 'Expected integer in [-4, 4] for narrow start but received -5');
    refused(() => dt.tensor(1), (s) => s.narrow(0, 0, 1), 'SHAPE_MISMATCH');
  });

  it('integers out of a dtype are refused, not wrapped (torch.tensor and torch.full raise)', async () => {
    refused(none, () => dt.tensor([2n ** 70n], { dtype: 'int64' }), 'INVALID_ARGUMENT', "Expected a bigint in int64's range");
    refused(none, () => dt.tensor([2n ** 40n], { dtype: 'int32' }), 'INVALID_ARGUMENT', "int32's range");
    refused(none, () => dt.full([1], 2 ** 63, { dtype: 'int64' }), 'INVALID_ARGUMENT', "for full value but received 9223372036854776000");
    refused(none, () => dt.full([1], 300, { dtype: 'uint8' }), 'INVALID_ARGUMENT', "uint8's range [0, 255]");
    refused(none, () => dt.full([1], NaN, { dtype: 'int32' }), 'INVALID_ARGUMENT');
    refused(none, () => dt.full([1], 1e300), 'INVALID_ARGUMENT', "float32's range");
    refused(none, () => dt.tensor([300], { dtype: 'uint8' }), 'INVALID_ARGUMENT');
    refused(none, () => dt.tensor(new Float64Array([1e30]), { dtype: 'int64' }), 'INVALID_ARGUMENT');
    // what PyTorch accepts: a Python int wraps into uint8 from -255 on, fractions truncate,
    // float16 rounds to inf, a float dtype takes a bigint past int64
    expect(await dt.full([1], -1, { dtype: 'uint8' }).array()).toEqual([255]);
    expect(await dt.full([1], 2.7, { dtype: 'int64' }).array()).toEqual([2]);
    expect(await dt.full([1], 1e6, { dtype: 'float16' }).array()).toEqual([Infinity]);
    expect(await dt.tensor([2n ** 70n], { dtype: 'float32' }).array()).toEqual([Math.fround(2 ** 70)]);
    expect(await dt.tensor([2n ** 62n]).data()).toEqual(new BigInt64Array([2n ** 62n]));
  });

  it('a value checked against the dtype it fills: maskedFill, clamp (with PyTorch promotion), pad, alpha', async () => {
    const ints = dt.arange(4);
    const all = dt.ones([4], { dtype: 'bool' });
    refused(none, () => ints.maskedFill(all, 2 ** 70), 'INVALID_ARGUMENT', 'for maskedFill value');
    refused(() => dt.zeros([4], { dtype: 'float16' }), (h) => h.maskedFill(all, 1e6), 'INVALID_ARGUMENT', "float16's range");
    refused(() => dt.zeros([2], { dtype: 'int32' }), (i) => i.clamp(2 ** 40), 'INVALID_ARGUMENT', 'for clamp min');
    refused(() => dt.zeros([4], { dtype: 'uint8' }), (u) => dt.where(all, u, -256), 'INVALID_ARGUMENT', 'for where scalar');
    refused(() => dt.zeros([2], { dtype: 'uint8' }), (u) => F.pad(u, [1, 1], { value: -1 }), 'INVALID_ARGUMENT', 'for pad value');
    refused(none, () => ints.add(ints, { alpha: 0.5 }), 'DTYPE_MISMATCH', 'alpha 0.500000 is not an integer');
    refused(() => dt.ones([1]), (o) => o.add(o, { alpha: 1e300 }), 'INVALID_ARGUMENT', 'alpha');
    // torch.clamp(int tensor, min=2.5) is float32; a float scalar added to a float tensor is a float
    const clamped = ints.clamp(2.5);
    expect(clamped.dtype).toBe('float32');
    expect(await clamped.array()).toEqual([2.5, 2.5, 2.5, 3]);
    expect(await dt.ones([1]).add(1e20).array()).toEqual([Math.fround(1e20)]);
    expect(await F.pad(ints, [1, 0], { value: 2.5 }).array()).toEqual([2, 0, 1, 2, 3]);
    // a float scalar beside a uint8 tensor makes the result float32, where -1.5 fits
    expect(await dt.where(all, dt.zeros([4], { dtype: 'uint8' }), -1.5).array()).toEqual([0, 0, 0, 0]);
  });

  it('sizes, dims, counts and seeds are exact integers, and shapes fit 64-bit byte counts', () => {
    refused(none, () => dt.zeros([2 ** 53 + 2]), 'INVALID_ARGUMENT', 'Expected shape (array of non-negative integers)');
    refused(() => dt.arange(4), (x) => x.sum(2 ** 64), 'INVALID_ARGUMENT', 'Expected integer of magnitude below 2^53 for sum dim');
    refused(() => dt.arange(4), (x) => x.reshape([2 ** 62, 0]), 'INVALID_ARGUMENT');
    refused(() => dt.zeros([1, 1]), (x) => x.expand([2 ** 31, 2 ** 31, 2 ** 3]), 'INVALID_ARGUMENT', 'holds more bytes than 64-bit sizes can count');
    refused(none, () => dt.manualSeed(2 ** 64), 'INVALID_ARGUMENT', 'Expected integer in [0, 2^48) for manualSeed seed');
    refused(none, () => dt.randint(0, 2 ** 63, [1]), 'INVALID_ARGUMENT');
    refused(none, () => dt.randint(0, 300, [1], { dtype: 'uint8' }), 'INVALID_ARGUMENT', 'for randint high - 1');
    refused(none, () => dt.arange(1e20), 'INVALID_ARGUMENT', 'more elements than 64-bit sizes can count');
    refused(none, () => dt.arange(0, 2.5, 1, { dtype: 'int64' }), 'INVALID_ARGUMENT', 'Expected integers for arange bounds (an int64 arange)');
    refused(() => dt.zeros([1, 1, 2, 2]), (img) => F.interpolate(img, { scaleFactor: Infinity }), 'INVALID_ARGUMENT', 'for interpolate scaleFactor');
    refused(() => dt.zeros([2, 2]), (x) => F.layerNorm(x, [2], { eps: -1 }), 'INVALID_ARGUMENT', 'Expected finite non-negative number for layer_norm eps');
    refused(() => dt.zeros([1, 2, 2]), (q) => F.scaledDotProductAttention(q, q, q, { scale: Infinity }), 'INVALID_ARGUMENT');
  });

  it('slice bounds past the ends are clamped, as Python clamps them (not cast to INT64_MIN)', async () => {
    const x = dt.arange(4);
    expect(await x.get(dt.slice(2 ** 70)).array()).toEqual([]);
    expect(await x.get(dt.slice(-(2 ** 70), 2)).array()).toEqual([0, 1]);
    expect(await x.get(dt.slice(1, 2 ** 64, 2 ** 70)).array()).toEqual([1]);
    refused(none, () => x.get(dt.slice(0.5)), 'INVALID_ARGUMENT', 'Expected integer for slice start but received 0.5');
  });
});

describe('errors come at the call', () => {
  it('options: unknown names, non-objects and booleans given strings are refused', () => {
    const q = dt.zeros([1, 2, 2]);
    refused(none, () => F.scaledDotProductAttention(q, q, q, { isCausal: 'yes' as never }), 'INVALID_ARGUMENT',
      'Expected boolean for sdpa isCausal but received "yes" of type string');
    refused(none, () => F.scaledDotProductAttention(q, q, q, { is_causal: true } as never), 'INVALID_ARGUMENT',
      'Unknown option "is_causal" in sdpa options (did you mean isCausal? options are camelCase)');
    const img = dt.zeros([1, 1, 2, 2]);
    refused(() => [dt.zeros([1, 1, 1, 1]), dt.zeros([1])] as const, ([w, t]) => F.conv2d(img, w, undefined, t as never), 'INVALID_ARGUMENT',
      'Expected options object for conv2d options but received Tensor of type object');
    refused(none, () => F.interpolate(img, { size: 4, mode: 'bilinear', alignCorners: 1 as never }), 'INVALID_ARGUMENT', 'for interpolate alignCorners');
    refused(none, () => dt.zeros([2], { dtyp: 'int64' } as never), 'INVALID_ARGUMENT', 'Unknown option "dtyp" in zeros options');
    refused(none, () => dt.zeros([2], { placements: [Symbol('x')] } as never), 'INVALID_ARGUMENT', 'but received [Symbol(x)] of type array');
  });

  it('dtype and shape errors that used to fail only when read', () => {
    const flags = dt.ones([2, 2], { dtype: 'bool' });
    refused(none, () => flags.matmul(flags), 'DTYPE_MISMATCH', 'matmul: is not defined for bool tensors');
    refused(none, () => F.linear(flags, flags), 'DTYPE_MISMATCH');
    refused(none, () => flags.neg(), 'DTYPE_MISMATCH');
    refused(none, () => flags.sub(1), 'DTYPE_MISMATCH', 'bool operand');
    refused(none, () => flags.argmax(), 'DTYPE_MISMATCH');
    refused(() => dt.arange(3), (x) => x.pow(-1), 'INVALID_ARGUMENT', 'negative integer powers');
    const q = dt.zeros([1, 2, 2]);
    const k = dt.zeros([1, 3, 2]);
    refused(() => dt.zeros([2, 2]), (mask) => F.scaledDotProductAttention(q, k, k, { attnMask: mask }), 'SHAPE_MISMATCH');
    refused(() => q.to('int64'), (qi) => F.scaledDotProductAttention(qi, qi, qi), 'DTYPE_MISMATCH');
    refused(() => dt.zeros([1, 1, 2, 2]), (img) => F.maxPool2d(img, 3), 'SHAPE_MISMATCH', 'the kernel does not fit the padded input');
    refused(() => dt.zeros([1, 1, 2, 2]), (img) => F.avgPool2d(img, 3), 'SHAPE_MISMATCH');
    refused(() => [dt.zeros([1, 1, 2, 2]), dt.zeros([1, 1, 1, 1], { dtype: 'float64' })] as const, ([img, w]) => F.conv2d(img, w), 'DTYPE_MISMATCH');
    refused(() => [dt.tensor(1), dt.tensor(2)], (ts) => dt.cat(ts), 'SHAPE_MISMATCH', 'zero-dimensional tensor');
    refused(() => [dt.tensor(1)], (ts) => dt.cat(ts), 'SHAPE_MISMATCH', 'zero-dimensional tensor');
    refused(() => dt.tensor(1), (s) => s.unbind(), 'SHAPE_MISMATCH');
    refused(() => [dt.zeros([2, 2]), dt.zeros([2])] as const, ([a, b]) => dt.outer(a, b), 'SHAPE_MISMATCH', 'outer: a must be 1-d');
  });

  it('set() checks everything first: two ellipses, a bad slice, an index tensor out of range leave x as it was', async () => {
    const x = dt.arange(4, undefined, 1, { dtype: 'float32' });
    refused(none, () => x.set('...', '...', 1), 'INVALID_ARGUMENT', "at most one '...'");
    refused(none, () => x.set(dt.slice(0.5), 1), 'INVALID_ARGUMENT', 'for set slice start');
    refused(() => dt.tensor([7n]), (i) => x.set(i, 1), 'INVALID_ARGUMENT', 'set: index 7 (at position 0 of the index tensor) is out of range for dim 0 of size 4');
    refused(() => dt.tensor([-1n]), (i) => x.set(i, 1), 'INVALID_ARGUMENT', 'out of range');
    refused(() => dt.zeros([3]), (v) => x.set(0, v), 'SHAPE_MISMATCH');
    expect(await x.array()).toEqual([0, 1, 2, 3]);
    x.set(dt.tensor([1n, 3n]), 9);
    expect(await x.array()).toEqual([0, 9, 2, 9]);
  });

  it('set() of a 0-d tensor casts the value to its dtype and refuses another mesh, leaving nothing behind', async () => {
    const x = dt.tensor(1.5);
    x.set(dt.tensor(2, { dtype: 'int64' }));
    expect([x.dtype, await x.array()]).toEqual(['float32', 2]);
    x.set('...', dt.tensor(true));
    expect(await x.array()).toEqual(1);
    const four = new dt.DeviceMesh('cpu', [0, 1, 2, 3]);
    refused(() => dt.tensor(3, { mesh: four }), (v) => x.set(v), 'MESH_MISMATCH', /set: the value lives on DeviceMesh\('cpu', \[0, 1, 2, 3\]\)/);
    expect(await x.array()).toEqual(1);
  });

  it('*Like ops refuse a missing tensor with a DTorchError, not a TypeError', () => {
    for (const like of [() => dt.zerosLike(undefined as never), () => dt.onesLike(null as never), () => dt.fullLike(undefined as never, 1), () => dt.randnLike(7 as never)]) {
      refused(none, like, 'INVALID_ARGUMENT', /Expected Tensor for (zeros|ones|full|randn)Like input/);
    }
  });

  it('composite ops leave nothing behind when a late step refuses', () => {
    refused(() => [dt.zeros([2]), dt.zeros([3])], (ts) => dt.stack(ts), 'SHAPE_MISMATCH');
    refused(() => dt.zeros([2], { dtype: 'int64' }), (c) => dt.where(c, 1, 2), 'DTYPE_MISMATCH');
    refused(() => dt.ones([2], { dtype: 'bool' }), (b) => dt.sub(1, b), 'DTYPE_MISMATCH');
    refused(none, () => dt.eye(2 ** 40), 'INVALID_ARGUMENT');
    refused(() => [dt.zeros([2, 3]), dt.tensor([0.5])] as const, ([x2, i]) => x2.get(0, i), 'INVALID_ARGUMENT');
    refused(() => [dt.zeros([1, 1, 2, 4]), dt.zeros([3, 4])] as const, ([x4, f]) => F.applyRotaryEmb(x4, [f, f]), 'SHAPE_MISMATCH');
    // [B, S, H, D] with sequenceDim 1: tables of S rows, the token dim not the last
    refused(() => [dt.zeros([1, 3, 2, 4]), dt.zeros([2, 4])] as const, ([x4, f]) => F.applyRotaryEmb(x4, [f, f], { sequenceDim: 1 }), 'SHAPE_MISMATCH', /must be \[S, D\] = \[3, 4\]/);
    refused(() => [dt.zeros([1, 3, 2, 4]), dt.zeros([3, 4])] as const, ([x4, f]) => F.applyRotaryEmb(x4, [f, f], { sequenceDim: 3 }), 'INVALID_ARGUMENT', /sequenceDim/);
    refused(() => [dt.zeros([1, 3, 2, 4]), dt.zeros([3, 4])] as const, ([x4, f]) => F.applyRotaryEmb(x4, [f, f], { sequenceDim: -1 }), 'INVALID_ARGUMENT', /before its last/);
  });

  it('a read larger than a JS ArrayBuffer is refused instead of aborting the process', () => {
    const huge = dt.empty([2 ** 33], { dtype: 'uint8' }); // never computed: only its read is refused
    expect(() => huge.dataSync()).toThrow(/needs 8589934592 bytes on the host, more than a JS ArrayBuffer holds here/);
    expect(() => huge.data()).toThrow(dt.DTorchError);
    huge.dispose();
  });
});
