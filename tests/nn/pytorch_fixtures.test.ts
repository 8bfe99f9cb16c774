// Modules built from @dtorch/nn layers, loaded from safetensors files that PyTorch wrote for
// modules of the same structure (tools/reference/make_nn_fixtures.py), give PyTorch's outputs
// (float32, <= 1e-5) on one CPU device and, with the tensor-parallel layers, on meshes
// tp=2, tp=4 and dp=2 x tp=2; a sharded load reads about 1/tp of the file per rank.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { readSafetensorsHeader } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { ConvBlock, MLP, Transformer } from './models.js';

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/nn/${name}`, import.meta.url));
const io = readSafetensorsHeader(fixture('io.safetensors'));

const ioTensor = (name: string, mesh: dt.DeviceMesh, placements?: dt.Placement[]) => fixtureTensor(io, name, { mesh, ...(placements ? { placements } : {}) });

async function expectClose(got: dt.Tensor, want: dt.Tensor, what: string): Promise<void> {
  expect(got.shape, what).toEqual(want.shape);
  const [g, w] = [(await got.data()) as Float32Array, (await want.data()) as Float32Array];
  let worst = 0;
  g.forEach((v, i) => (worst = Math.max(worst, Math.abs(v - w[i]!) / Math.max(1, Math.abs(w[i]!)))));
  expect(worst, `${what}: largest error`).toBeLessThanOrEqual(1e-5);
}

interface MeshCase {
  name: string;
  make: () => dt.DeviceMesh;
  tp: number;
  /** Placements of the inputs (the batch sharded over dp). */
  input: (mesh: dt.DeviceMesh) => dt.Placement[];
}

const meshes: MeshCase[] = [
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]), tp: 1, input: () => [dt.Replicate()] },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']), tp: 2, input: () => [dt.Replicate()] },
  { name: 'tp=4', make: () => new dt.DeviceMesh('cpu', [0, 1, 2, 3], ['tp']), tp: 4, input: () => [dt.Replicate()] },
  { name: 'dp=2 x tp=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['dp', 'tp']), tp: 2, input: () => [dt.Shard(0), dt.Replicate()] },
];

describe.each(meshes)('nn modules loaded from PyTorch checkpoints on $name', ({ make, tp, input }) => {
  // the fixture Transformer's output for the fixture input equals PyTorch's; the model is then released
  async function expectTransformerOutput(model: Transformer, mesh: dt.DeviceMesh, what: string): Promise<void> {
    const ids = ioTensor('attention.in', mesh, input(mesh));
    const y = model.call(ids);
    await expectClose(y, ioTensor('attention.out', mesh), what);
    dt.dispose([ids, y]);
    model.dispose();
  }

  it('MLP (Sequential of Linear, GELU, Linear; LayerNorm) gives PyTorch outputs, each rank reading ~1/tp of the file', async () => {
    const mesh = make();
    const model = new MLP(mesh, tp > 1);
    const result = await model.loadStateDict(fixture('mlp.safetensors'));
    expect(result.missingKeys).toEqual([]);
    expect(result.unexpectedKeys).toEqual([]);
    if (tp > 1) expect((model.layers.at(0) as nn.Linear).weight.placements.map(String)).toContain('S(0)');
    const x = ioTensor('mlp.in', mesh, input(mesh));
    const y = model.call(x);
    await expectClose(y, ioTensor('mlp.out', mesh), 'mlp');
    // every byte of the file read exactly once in all, each rank's share about 1/tp
    const dataBytes = [...readSafetensorsHeader(fixture('mlp.safetensors')).tensors.values()].reduce((n, t) => n + t.end - t.begin, 0);
    expect(result.bytesRead).toBe(dataBytes);
    for (const bytes of result.bytesPerRank) expect(bytes / dataBytes).toBeLessThanOrEqual(1 / tp + 0.03);
    dt.dispose([x, y]);
    model.dispose();
  });

  it('Transformer (Embedding, attention blocks with to_q/to_k/to_v/to_out.0, feed-forward, RMSNorm) gives PyTorch outputs', async () => {
    const mesh = make();
    const model = new Transformer(mesh, tp > 1);
    const result = await model.loadStateDict(fixture('attention.safetensors'));
    const dataBytes = [...readSafetensorsHeader(fixture('attention.safetensors')).tensors.values()].reduce((n, t) => n + t.end - t.begin, 0);
    expect(result.bytesRead).toBe(dataBytes);
    const ratios = result.bytesPerRank.map((b) => b / dataBytes);
    for (const r of ratios) expect(r).toBeLessThanOrEqual(1 / tp + 0.02);
    console.log(`transformer on ${mesh}: bytes read per rank / file data = ${ratios.map((r) => r.toFixed(3)).join(', ')}`);
    const ids = ioTensor('attention.in', mesh, input(mesh));
    const before = dt.memory().numTensors;
    const y = model.call(ids);
    expect(dt.memory().numTensors, 'call() frees every intermediate').toBe(before + 1);
    await expectClose(y, ioTensor('attention.out', mesh), 'transformer');
    dt.dispose([ids, y]);
    model.dispose();
  });

  it.skipIf(tp === 1)('the same Transformer, sequence parallel (tokens sharded between the linears), gives PyTorch outputs', async () => {
    const mesh = make();
    const model = new Transformer(mesh, true, { sp: true });
    await model.loadStateDict(fixture('attention.safetensors'));
    expect(model.transformer_blocks.at(0).ff.proj_out).toBeInstanceOf(nn.RowParallelLinearWithSequenceParallelOutput);
    await expectTransformerOutput(model, mesh, 'sequence-parallel transformer');
  });

  it('the same Transformer loads from a sharded checkpoint (model.safetensors.index.json)', async () => {
    const mesh = make();
    const model = new Transformer(mesh, tp > 1);
    const result = await model.loadStateDict(fixture('sharded/model.safetensors.index.json'));
    expect(result.missingKeys).toEqual([]);
    await expectTransformerOutput(model, mesh, 'transformer from shards');
  });

  it('ConvBlock (Conv2d with padding, stride and groups; GroupNorm; SiLU) gives PyTorch outputs', async () => {
    const mesh = make();
    const model = new ConvBlock(mesh);
    await model.loadStateDict(fixture('conv.safetensors'));
    const x = ioTensor('conv.in', mesh, input(mesh));
    const y = model.call(x);
    await expectClose(y, ioTensor('conv.out', mesh), 'conv');
    dt.dispose([x, y]);
    model.dispose();
  });
});
