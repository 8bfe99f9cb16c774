// Fuzz test of the op surface: 10,000+ calls of random ops with random shapes, dims, dtypes,
// placements and argument types. Every call either returns or throws a DTorchError (never a
// TypeError from inside DTorch, never a crash) and a call that throws leaves no tensor behind;
// reads of what was returned resolve, or reject only where the failure depends on the data (an
// index out of range): bad input fails at the call, not at the read; afterwards the engine
// still computes correctly. (tests/fuzz/bad_arguments.test.ts spoils valid calls one argument at
// a time.)
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { Gen, numel, propertyMeshes, propertySeed } from '../distributed/random.js';

const meshes = propertyMeshes();
const dtypes: dt.DType[] = ['float32', 'float32', 'float16', 'bfloat16', 'float64', 'int64', 'int32', 'bool', 'uint8'];

// Every op of the surface, called with the arguments given (possibly nonsense).
type AnyFn = (...args: unknown[]) => unknown;
const F = dt.F as unknown as Record<string, AnyFn>;
const api = dt as unknown as Record<string, AnyFn>;
const surface: Record<string, AnyFn> = {
  ...Object.fromEntries(
    [
      'add', 'sub', 'mul', 'div', 'pow', 'minimum', 'maximum', 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'logicalAnd', 'logicalOr',
      'logicalNot', 'where', 'maskedFill', 'clamp', 'neg', 'abs', 'relu', 'square', 'floor', 'round', 'exp', 'log', 'log2',
      'sqrt', 'rsqrt', 'reciprocal', 'sin', 'cos', 'tanh', 'sigmoid', 'silu', 'quickGelu', 'gelu', 'isnan', 'isinf', 'matmul', 'sum', 'mean',
      'any', 'all', 'max', 'min', 'argmax', 'softmax', 'logSoftmax', 'to', 'reshape', 'flatten', 'unflatten', 'squeeze',
      'unsqueeze', 'permute', 'transpose', 'expand', 'contiguous', 'clone', 'cat', 'stack', 'split', 'chunk', 'unbind', 'joinShards', 'splitShards',
      'narrow', 'indexSelect', 'repeat', 'repeatInterleave', 'get', 'outer', 'einsum', 'redistribute', 'toLocal',
      'zeros', 'ones', 'full', 'arange', 'rand', 'randn', 'randint', 'tensor',
    ].map((name) => [name, api[name]!]),
  ),
  ...Object.fromEntries(
    ['linear', 'layerNorm', 'rmsNorm', 'groupNorm', 'embedding', 'scaledDotProductAttention', 'applyRotaryEmb', 'conv2d',
      'interpolate', 'avgPool2d', 'maxPool2d', 'pad'].map((name) => [`F.${name}`, F[name]!]),
  ),
};

describe('op surface (fuzz)', () => {
  it('returns or throws DTorchError on 10,000 random calls, and still computes afterwards', async () => {
    const g = new Gen(propertySeed + 7);
    const pool: dt.Tensor[] = [];
    const makeTensor = (): dt.Tensor => {
      const mesh = g.pick(meshes);
      const shape = g.shape(0, 4, 5);
      const dtype = g.pick(dtypes);
      const values = g.values(numel(shape)).map((v) => (dtype === 'bool' ? v > 0 : dtype === 'uint8' ? Math.abs(v) : v));
      const placements = g.chance(0.6) ? undefined : g.placements(mesh, shape.length);
      try {
        return dt.tensor(values as number[], { shape, dtype, mesh, placements });
      } catch {
        return dt.tensor(values as number[], { shape, dtype, mesh });
      }
    };
    for (let i = 0; i < 40; i++) pool.push(makeTensor());
    const randomArg = (): unknown => {
      const r = g.next();
      if (r < 0.45) return g.pick(pool);
      if (r < 0.6) return g.int(-4, 4);
      if (r < 0.65) return g.pick([0.5, -1.5, NaN, Infinity, 1e9]);
      if (r < 0.72) return g.shape(0, 3, 4).map((s) => (g.chance(0.1) ? -1 : s));
      if (r < 0.76) return g.pick(dtypes);
      if (r < 0.8) return [g.pick(pool), g.pick(pool)];
      if (r < 0.84) return g.placements(g.pick(meshes), 2);
      if (r < 0.87) return g.pick(meshes);
      if (r < 0.9) return { dim: g.int(-2, 2), keepdim: g.chance(0.5), approximate: 'tanh', eps: 1e-5, scale: 0.5 };
      if (r < 0.93) return g.pick(['...', null, dt.slice(0, 2), 'bhsd->bshd', 'tanh', 'bilinear']);
      if (r < 0.96) return undefined;
      return g.pick([true, false, {}, 'spoons', Symbol('x'), () => 1, 10n]);
    };
    const names = Object.keys(surface);
    const reads: Promise<unknown>[] = [];
    const lateFailures: string[] = [];
    // kernels that fail on the data itself (an index out of range), which no record-time check sees
    const dataDependent = new Set(['index_select', 'embedding', 'index_copy']);
    let returned = 0;
    let refused = 0;
    for (let i = 0; i < 10_000; i++) {
      const name = g.pick(names);
      const args = Array.from({ length: g.int(0, 4) }, randomArg);
      let result: unknown;
      const before = dt.memory().numTensors;
      try {
        result = surface[name]!(...args);
        returned++;
      } catch (err) {
        if (!(err instanceof dt.DTorchError)) {
          throw new Error(`call ${i}: ${name}(${args.map((a) => String(a)).join(', ')}) threw ${(err as Error)?.constructor?.name}: ${(err as Error)?.message}`);
        }
        const left = dt.memory().numTensors - before;
        if (left !== 0) throw new Error(`call ${i}: ${name}(${args.map((a) => String(a)).join(', ')}) threw ${err.code} and left ${left} tensor(s) behind`);
        refused++;
        continue;
      }
      const outs = (Array.isArray(result) ? result : result instanceof dt.Tensor ? [result] : Object.values(result ?? {})).filter(
        (t): t is dt.Tensor => t instanceof dt.Tensor,
      );
      for (const t of outs) {
        if (g.chance(0.05)) {
          const what = `call ${i}: ${name}(${args.map((a) => String(a)).join(', ')})`;
          reads.push(
            Promise.resolve()
              .then(() => t.data())
              .then(
                () => 'ok',
                (e: unknown) => {
                  if (!(e instanceof dt.DTorchError)) throw e;
                  const cause = /failed in (\w+)/.exec(e.message)?.[1] ?? e.op ?? ''; // a collective names the op that failed
                  if (e.code === 'KERNEL_FAILED' && !dataDependent.has(e.op ?? '') && !dataDependent.has(cause)) lateFailures.push(`${what}: the read failed: ${e.message.split('\n')[0]}`);
                  return 'failed';
                },
              ),
          );
        }
        if (pool.length < 80 && t.numel < 4096 && g.chance(0.3)) pool.push(t);
        else if (!pool.includes(t)) t.dispose();
      }
      if (g.chance(0.02) && pool.length > 20) pool.splice(g.int(0, pool.length - 1), 1)[0]!.dispose();
    }
    await Promise.all(reads);
    expect(lateFailures.slice(0, 10)).toEqual([]);
    expect(returned).toBeGreaterThan(500);
    expect(refused).toBeGreaterThan(1000);
    // the engine still computes correctly
    const mesh = meshes[3]!;
    const x = dt.arange(12, undefined, 1, { mesh, dtype: 'float32' }).reshape([3, 4]).redistribute([dt.Shard(1)]);
    expect(await x.matmul(dt.ones([4, 2], { mesh })).sum(0).array()).toEqual([66, 66]);
    dt.dispose(pool);
  }, 120_000);
});
