import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { readSafetensorsHeader } from '@dtorch/external';
import * as nn from './index.js';

const dir = mkdtempSync(join(tmpdir(), 'dtorch-nn-'));

class Block extends nn.Module {
  attn: nn.Linear;
  to_out: nn.ModuleList;
  constructor(mesh?: dt.DeviceMesh) {
    super();
    this.attn = new nn.ColumnParallelLinear(4, 8, { mesh });
    this.to_out = new nn.ModuleList([new nn.RowParallelLinear(8, 4, { mesh }), new nn.Dropout(0.1)]);
  }
  forward(x: dt.Tensor): dt.Tensor {
    return this.to_out.at(0).forward(this.attn.forward(x)) as dt.Tensor;
  }
}

class Net extends nn.Module {
  embed: nn.Embedding;
  transformer_blocks: nn.ModuleList<Block>;
  norm: nn.LayerNorm;
  declare position_ids: dt.Tensor;
  constructor(mesh?: dt.DeviceMesh) {
    super();
    this.embed = new nn.Embedding(10, 4, { mesh });
    this.transformer_blocks = new nn.ModuleList([new Block(mesh), new Block(mesh)]);
    this.norm = new nn.LayerNorm(4, { mesh });
    this.registerBuffer('position_ids', dt.arange(6, undefined, 1, { mesh }));
  }
  forward(ids: dt.Tensor): dt.Tensor {
    let x = this.embed.forward(ids);
    for (const b of this.transformer_blocks) x = b.forward(x);
    return this.norm.forward(x);
  }
}

describe('Module', () => {
  it('skipInit builds modules without drawing their initial values, and they load as usual', async () => {
    const draw = () => dt.rand([3]).data();
    dt.manualSeed(5);
    const expected = await draw();
    dt.manualSeed(5);
    const net = nn.skipInit(() => new Net()); // no rand()/randn() seeds taken
    expect(await draw()).toEqual(expected);
    dt.manualSeed(5);
    const drawn = new Net(); // the normal path draws
    expect(await draw()).not.toEqual(expected);
    expect([...net.namedParameters()].map(([k, p]) => [k, p.shape])).toEqual([...drawn.namedParameters()].map(([k, p]) => [k, p.shape]));
    const weights = drawn.stateDict();
    const held = net.norm.weight!; // a reference taken before the load
    await net.loadStateDict(weights);
    dt.dispose([...weights.values()]);
    expect(net.norm.weight).toBe(held); // the same Parameter, now holding the loaded values
    expect(await held.data()).toEqual(await drawn.norm.weight!.data());
    const ids = dt.tensor([[1, 2, 3]], { dtype: 'int64' });
    expect(await net.call(ids).data()).toEqual(await drawn.call(ids).data());
    expect(() => nn.skipInit(5 as never)).toThrow('skipInit build');
    dt.dispose([ids]);
    net.dispose();
    drawn.dispose();
  });

  it('names parameters, buffers and modules as PyTorch state-dict keys', () => {
    const net = new Net();
    expect([...net.namedParameters()].map(([k]) => k)).toEqual([
      'embed.weight',
      'transformer_blocks.0.attn.weight',
      'transformer_blocks.0.attn.bias',
      'transformer_blocks.0.to_out.0.weight',
      'transformer_blocks.0.to_out.0.bias',
      'transformer_blocks.1.attn.weight',
      'transformer_blocks.1.attn.bias',
      'transformer_blocks.1.to_out.0.weight',
      'transformer_blocks.1.to_out.0.bias',
      'norm.weight',
      'norm.bias',
    ]);
    expect([...net.namedBuffers()].map(([k]) => k)).toEqual(['position_ids']);
    expect([...net.namedModules()].map(([k]) => k)).toEqual([
      '', 'embed', 'transformer_blocks', 'transformer_blocks.0', 'transformer_blocks.0.attn', 'transformer_blocks.0.to_out',
      'transformer_blocks.0.to_out.0', 'transformer_blocks.0.to_out.1', 'transformer_blocks.1', 'transformer_blocks.1.attn',
      'transformer_blocks.1.to_out', 'transformer_blocks.1.to_out.0', 'transformer_blocks.1.to_out.1', 'norm',
    ]);
    expect(net.numParameters()).toBe(40 + 2 * (32 + 8 + 32 + 4) + 8);
    expect(net.parameters().every((p) => p instanceof nn.Parameter && p.mesh === dt.defaultMesh())).toBe(true);
    expect(net.transformer_blocks.length).toBe(2);
    expect(net.getSubmodule('transformer_blocks.1.to_out.0')).toBe(net.transformer_blocks.at(1).to_out.at(0));
    net.dispose();
  });

  it('prints a readable tree', () => {
    const net = new Net();
    expect(net.toString()).toBe(
      [
        'Net(',
        '  (embed): Embedding(10, 4)',
        '  (transformer_blocks): ModuleList(',
        '    (0): Block(',
        '      (attn): ColumnParallelLinear(in_features=4, out_features=8, bias=true)',
        '      (to_out): ModuleList(',
        '        (0): RowParallelLinear(in_features=8, out_features=4, bias=true)',
        '        (1): Dropout(p=0.1)',
        '      )',
        '    )',
        '    (1): Block(',
        '      (attn): ColumnParallelLinear(in_features=4, out_features=8, bias=true)',
        '      (to_out): ModuleList(',
        '        (0): RowParallelLinear(in_features=8, out_features=4, bias=true)',
        '        (1): Dropout(p=0.1)',
        '      )',
        '    )',
        '  )',
        '  (norm): LayerNorm((4,), eps=0.00001, elementwise_affine=true)',
        ')',
      ].join('\n'),
    );
    net.dispose();
  });

  it('call() runs forward inside tidy: only the output survives', async () => {
    const net = new Net();
    const ids = dt.tensor([1n, 2n, 3n]);
    const before = dt.memory().numTensors;
    const y = net.call(ids);
    expect(dt.memory().numTensors).toBe(before + 1);
    expect(y.shape).toEqual([3, 4]);
    // the tp layers are plain layers on a mesh without a 'tp' dim: the same math, done here on
    // the host in float64 from the module's weights (not with the F.* functions it calls)
    const read = async (t: dt.Tensor) => Array.from((await t.data()) as Float32Array);
    const linear = (x: number[][], w: number[], b: number[]) => x.map((row) => b.map((bias, o) => row.reduce((s, v, i) => s + v * w[o * row.length + i]!, bias)));
    const table = await read(net.embed.weight);
    let x = [1, 2, 3].map((id) => table.slice(id * 4, id * 4 + 4));
    for (const b of net.transformer_blocks) {
      const out = b.to_out.at(0) as nn.Linear;
      x = linear(linear(x, await read(b.attn.weight), await read(b.attn.bias!)), await read(out.weight), await read(out.bias!));
    }
    const [gamma, beta] = [await read(net.norm.weight!), await read(net.norm.bias!)];
    const expected = x.flatMap((row) => {
      const mean = row.reduce((a, v) => a + v, 0) / row.length;
      const variance = row.reduce((a, v) => a + (v - mean) ** 2, 0) / row.length;
      return row.map((v, i) => ((v - mean) / Math.sqrt(variance + 1e-5)) * gamma[i]! + beta[i]!);
    });
    const got = await read(y);
    expect(got.length).toBe(expected.length);
    got.forEach((v, i) => expect(Math.abs(v - expected[i]!), `at ${i}`).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(expected[i]!))));
    dt.dispose([ids, y]);
    net.dispose();
  });

  it('to(dtype) casts floating parameters and keeps integer buffers', () => {
    const net = new Net().to('bfloat16');
    expect(new Set(net.parameters().map((p) => p.dtype))).toEqual(new Set(['bfloat16']));
    expect(net.position_ids.dtype).toBe('int64');
    net.dispose();
  });

  it('stateDict() written with saveSafetensors and loaded again on a tp mesh round-trips exactly', async () => {
    const source = new Net().to('bfloat16');
    const path = join(dir, 'net.safetensors');
    const full = source.stateDict();
    await nn.saveSafetensors(path, full, { format: 'pt' });
    dt.dispose([...full.values()]);
    const mesh = new dt.DeviceMesh('cpu', [0, 1], ['tp']);
    const copy = new Net(mesh).to('bfloat16');
    await copy.loadStateDict(path);
    expect(copy.transformer_blocks.at(0).attn.weight.placements.map(String)).toEqual(['S(0)']);
    const again = join(dir, 'again.safetensors');
    const gathered = copy.stateDict();
    await nn.saveSafetensors(again, gathered, { format: 'pt' });
    dt.dispose([...gathered.values()]);
    expect(readFileSync(again).equals(readFileSync(path))).toBe(true);
    expect(readSafetensorsHeader(again).tensors.get('embed.weight')).toMatchObject({ dtype: 'BF16', shape: [10, 4] });
    source.dispose();
    copy.dispose();
  });

  it('loads from a map of tensors, converting dtype and placing each parameter', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1], ['tp']);
    const net = new nn.ColumnParallelLinear(2, 4, { mesh, bias: false });
    const w = dt.tensor([[1, 2], [3, 4], [5, 6], [7, 8]], { dtype: 'float64' });
    const result = await net.loadStateDict(new Map([['weight', w]]));
    expect(result).toMatchObject({ missingKeys: [], unexpectedKeys: [] });
    w.dispose(); // the module holds its own copy
    expect(net.weight.dtype).toBe('float32');
    expect(net.weight.placements.map(String)).toEqual(['S(0)']);
    expect(await net.weight.array()).toEqual([[1, 2], [3, 4], [5, 6], [7, 8]]);
    net.dispose();
  });

  it('reports missing and unexpected keys: strict throws, non-strict returns them', async () => {
    const net = new nn.Linear(2, 2);
    const w = dt.ones([2, 2]);
    const extra = dt.ones([1]);
    await expect(net.loadStateDict({ weight: w, extra })).rejects.toThrow(
      'loadStateDict: the given tensors does not match Linear: missing keys "bias"; unexpected keys "extra"; fix the names or pass { strict: false }',
    );
    const result = await net.loadStateDict({ weight: w, extra }, { strict: false });
    expect(result).toMatchObject({ missingKeys: ['bias'], unexpectedKeys: ['extra'] });
    await expect(net.loadStateDict({ weight: w, bias: extra })).rejects.toThrow(
      'loadStateDict: "bias" is [1] in the given tensors but [2] in the module',
    );
    await expect(net.loadStateDict(join(dir, 'nope.safetensors'))).rejects.toThrow(/nope\.safetensors: cannot open/);
    dt.dispose([w, extra]);
    net.dispose();
  });

  it('validates layer arguments with one message format', () => {
    expect(() => new nn.Linear(0, 2)).toThrow('Expected positive integer for Linear inFeatures but received 0 of type number');
    expect(() => new nn.Linear(2, 2, { bias: 'yes' as unknown as boolean })).toThrow('Expected boolean for Linear bias');
    expect(() => new nn.GroupNorm(3, 8)).toThrow('GroupNorm: numChannels 8 is not divisible by numGroups 3');
    expect(() => new nn.Dropout(2)).toThrow('Dropout: p must be in [0, 1], got 2');
    expect(() => new nn.Linear(2, 2, { mesh: 'cpu' as unknown as dt.DeviceMesh })).toThrow('Expected DeviceMesh for Linear mesh');
  });
});

describe('sliceRuns', () => {
  it('is one run for a dim-0 piece and one run per row for a later dim', () => {
    expect(nn.sliceRuns([4, 6], { shape: [2, 6], offset: [2, 0] }, 4)).toEqual([{ from: 48, length: 48 }]);
    expect(nn.sliceRuns([2, 6], { shape: [2, 3], offset: [0, 3] }, 2)).toEqual([
      { from: 6, length: 6 },
      { from: 18, length: 6 },
    ]);
    expect(nn.sliceRuns([2, 3, 4], { shape: [1, 2, 4], offset: [1, 1, 0] }, 1)).toEqual([{ from: 16, length: 8 }]);
    expect(nn.sliceRuns([3, 2], { shape: [0, 2], offset: [3, 0] }, 4)).toEqual([]);
  });
});
