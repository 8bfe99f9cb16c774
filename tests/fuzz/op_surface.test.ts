// Fuzz test of the op surface: 10,000+ calls of random ops with random shapes, dims, dtypes,
// placements and argument types. Every call either returns or throws a DTorchError (never a
// TypeError from inside DTorch, never a crash) and a call that throws leaves no tensor behind;
// reads of what was returned resolve, or reject only where the failure depends on the data (an
// index out of range): bad input fails at the call, not at the read; afterwards the engine
// still computes correctly. (tests/fuzz/bad_arguments.test.ts spoils valid calls one argument at
// a time.) The ops are every function exported, less the exclusions listed below; the last test
// holds them to the operator table of docs/operators.md.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { Gen, numel, propertyMeshes, propertySeed } from '../distributed/random.js';

const meshes = propertyMeshes();
const dtypes: dt.DType[] = ['float32', 'float32', 'float16', 'bfloat16', 'float64', 'int64', 'int32', 'bool', 'uint8'];

// The surface: every function that `@dtorch/api` and `dt.F` export, less the exports below, so a
// new op is fuzzed (and must be documented, see the last test) as soon as it is exported.
type AnyFn = (...args: unknown[]) => unknown;
const F = dt.F as unknown as Record<string, unknown>;
const api = dt as unknown as Record<string, unknown>;
// Namespaces (dt.F, dt.functional, dt.cuda, dt.cluster, dt.graph, dt.ErrorCode, dt.dtypeNames) and
// values (dt.dtorchVersion) are not functions; classes are skipped too, those with methods on their
// prototype or written as classes (today Tensor, DeviceMesh, Placement and its three kinds, Slice,
// DTorchError): called without `new` they throw a TypeError, which is not a refused op.
const isClass = (f: AnyFn): boolean =>
  /^class\b/.test(Function.prototype.toString.call(f)) || Object.getOwnPropertyNames(f.prototype ?? {}).some((n) => n !== 'constructor');
const functionsOf = (ns: Record<string, unknown>, prefix: string): [string, AnyFn][] =>
  Object.entries(ns)
    .filter((e): e is [string, AnyFn] => typeof e[1] === 'function' && !isClass(e[1] as AnyFn))
    .map(([name, fn]) => [prefix + name, fn]);
const exported = new Map([...functionsOf(api, ''), ...functionsOf(F, 'F.')]);
// Exported functions that are not ops: a fuzz call of one of these with random arguments must never happen.
const notOps: Record<string, string> = {
  tidy: 'runs a callback in a scope and frees what it made',
  keep: 'marks a tensor to outlive tidy(), changes no value',
  dispose: 'frees tensors (the pool\'s among them)',
  memory: 'reads the engine\'s counters, which the test itself uses',
  resetPeakMemory: 'changes a global setting (peak tracking)',
  sync: 'waits for the devices',
  workers: 'describes the worker threads',
  nativeSettings: 'reads the engine\'s settings',
  setCaptureStacks: 'changes a global setting',
  manualSeed: 'changes a global setting (the seed of unseeded random ops), though the docs list it with creation',
  defaultMesh: 'returns the default mesh, not a tensor',
  initDeviceMesh: 'builds a DeviceMesh',
  Shard: 'placement constructor',
  Replicate: 'placement constructor',
  Partial: 'placement constructor',
  placementFromCode: 'placement helper (wire code to Placement)',
  formatPlacements: 'placement helper (text)',
  normalizePlacements: 'placement helper (argument check)',
  checkDtype: 'argument check of a dtype name',
  bytesPerElement: 'the size of a dtype\'s element, a number',
  isTensor: 'type guard',
  isDTorchError: 'type guard',
  torchInfo: 'describes LibTorch and the GPUs',
  describeRuntime: 'describes the runtime (text)',
  slice: 'builds a Slice index for get and set, not a tensor',
  explainRedistribute: 'describes the steps of a redistribute, runs nothing',
  localShape: 'layout query, no tensor',
  localShapes: 'layout query, no tensor',
  localPieceOf: 'layout arithmetic, no tensor',
  visualizeSharding: 'layout as text, no tensor',
};
// Ops that random arguments cannot call as the test's oracles require, each with why.
const notFuzzable: Record<string, string> = {
  eye: 'n x m elements from two random ints: eye(1e9) (10^18) takes 20 s and 16 GB on the CPU even when disposed at once',
};
const surface: Record<string, AnyFn> = Object.fromEntries(
  [...exported].filter(([name]) => !(name in notOps) && !(name in notFuzzable)),
);

// The operator table of docs/operators.md (the first table after '# Operators'): one row per
// family, the ops in backticks, either a list of names (`neg abs relu`, `tensor`, `F.linear`) or
// one of the notations below. The `dt.F` row names functions of dt.F.
const notations: Record<string, string[]> = {
  'x.get(...)': ['get'],
  'x.set(..., value)': ['set'],
  'dt.slice(start, end, step)': ['slice'],
  null: [], // an index of get and set
  "'...'": [], // an index of get and set
  'x.max(dim)': ['max'],
  '{ values, indices }': [], // what x.max(dim) returns
  'scaledDotProductAttention(q, k, v, { heads })': ['F.scaledDotProductAttention'],
  '[..., L, heads·E]': [], // a shape
  'F.allGatherLinear(x, weights, biases)': ['F.allGatherLinear'],
  'F.linearReduceScatter(inputs, weights, { dim, bias })': ['F.linearReduceScatter'],
};
// The `dt.F` row ends "and the activations": dt.F's activations (torch.nn.functional's, softmax
// among them), each the same function as a dt export of the unary or reductions rows.
const activationRows = ['unary', 'reductions'];
function operatorTable(): { names: Set<string>; unparsed: string[] } {
  const lines = readFileSync(fileURLToPath(new URL('../../docs/operators.md', import.meta.url)), 'utf8').split('\n');
  const first = lines.findIndex((line, i) => i > lines.indexOf('# Operators') && line.startsWith('|'));
  const after = lines.findIndex((line, i) => i > first && !line.startsWith('|'));
  const names = new Set<string>();
  const unparsed: string[] = [];
  const activations: string[] = [];
  let withActivations = false;
  for (const row of lines.slice(first + 2, after)) {
    // past the header and its --- line
    const [family, ops] = row.split('|').slice(1, -1).map((cell) => cell.trim());
    const prefix = family === '`dt.F`' ? 'F.' : '';
    for (const [, span] of ops!.matchAll(/`([^`]+)`/g)) {
      if (span! in notations) for (const name of notations[span!]!) names.add(name);
      else if (/^(F\.)?[A-Za-z]\w*( (F\.)?[A-Za-z]\w*)*$/.test(span!)) {
        for (const name of span!.split(' ')) names.add(name.startsWith('F.') ? name : prefix + name);
        if (activationRows.includes(family!)) activations.push(...span!.split(' ').filter((name) => typeof F[name] === 'function' && F[name] === api[name]));
      } else unparsed.push(span!);
    }
    withActivations ||= prefix !== '' && ops!.includes('and the activations');
  }
  if (withActivations) for (const name of activations) names.add(`F.${name}`);
  return { names, unparsed };
}

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

  it('excludes only exports', () => {
    expect([...Object.keys(notOps), ...Object.keys(notFuzzable)].filter((name) => !exported.has(name))).toEqual([]);
  });

  it('fuzzes what the operator table of docs/operators.md lists, and the table names only exports', () => {
    const table = operatorTable();
    expect(table.unparsed, 'spans of the table that are neither names nor in `notations`').toEqual([]);
    const ops = [...exported.keys()].filter((name) => !(name in notOps));
    expect(ops.filter((name) => !table.names.has(name)), 'ops the table lacks').toEqual([]);
    expect([...table.names].filter((name) => !exported.has(name)), 'names of the table that are not exported functions').toEqual([]);
  });
});
