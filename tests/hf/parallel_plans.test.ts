// Parallel plans applied from outside a model (hf.parallelize, issue 40): the plans a model's
// constructor puts on, taken off (hf.removeContextParallel) and put on again from outside, give
// the same sample bit for bit and split the tokens where they did (Flux on ulysses=2 and ring=2,
// SD3.5 on ring=2 x ulysses=2, its attentions ring attention again); taken off, the model computes
// as one device does (its tokens whole, no ring attention, no hook left on any module, every
// joint-attention hook back to piece by piece) and equals its fixture. A plan a new model declares
// (a toy one) splits the batch and tokens, gathers and splits layers over 'tp' where it says,
// equal to the model without it; a model without a plan runs replicated on any mesh. Bad
// arguments are DTorchErrors that change nothing.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader } from '@dtorch/external';
import { countRecords } from '../count_records.js';
import { fixtureTensor } from '../fixture_tensors.js';
import { expectClose } from './expect_close.js';

const folder = (name: string) => fileURLToPath(new URL(`../fixtures/hf/models/${name}`, import.meta.url));
const bytes = async (t: dt.Tensor) => Buffer.from(((await t.data()) as Float32Array).buffer);
const placements = (t: dt.Tensor) => t.placements.map(String).join();

// every module of `model` (but the one a test watches) runs its class's forward and joins
// streams piece by piece
function leftSingleDevice(model: hf.nn.Module, watched?: hf.nn.Module): void {
  for (const [path, m] of model.namedModules()) {
    if (m !== watched) expect(Object.hasOwn(m, 'forward'), `no hook left on "${path}"`).toBe(false);
    const join = (m as Partial<hf.HasJointAttention>).jointAttention;
    if (join) expect(join, `"${path}" joins piece by piece`).toBe(hf.pieceByPieceJoin);
  }
}

// the placements of the input `attn` sees on its next calls
function watchInput(attn: hf.nn.Module): string[] {
  const seen: string[] = [];
  attn.registerForwardPreHook((_, args) => void seen.push(placements(args[0] as dt.Tensor)));
  return seen;
}

describe.each([
  { name: 'ulysses=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']) },
  { name: 'ring=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ring']) },
])('FluxTransformer2DModel on $name', ({ make }) => {
  it('equals, bit for bit, its plan taken off and put on again from outside; off, one device', async () => {
    const io = readSafetensorsHeader(folder('flux-io.safetensors'));
    const mesh = make();
    const model = await hf.FluxTransformer2DModel.fromPretrained(folder('flux-dev'), { mesh, subfolder: 'transformer' });
    const t = (key: string) => fixtureTensor(io, `flux-dev.${key}`, { mesh });
    const hidden = t('hidden_states');
    const options = { encoderHiddenStates: t('encoder_hidden_states'), pooledProjections: t('pooled_projections'), timestep: t('timestep'), guidance: t('guidance'), imgIds: t('img_ids'), txtIds: t('txt_ids') };
    const attn = model.single_transformer_blocks.at(-1).attn;
    const seen = watchInput(attn);
    const planned = model.call(hidden, options);
    expect(seen.pop(), 'the joint tokens split').toBe('S(1)');

    expect(hf.removeContextParallel(model)).toBe(true);
    expect(hf.removeContextParallel(model), 'nothing left to take off').toBe(false);
    leftSingleDevice(model, attn);
    const plain = model.call(hidden, options);
    expect(seen.pop(), 'the joint tokens whole').toBe('R');
    expect(placements(plain)).toBe('R');
    await expectClose(plain, fixtureTensor(io, 'flux-dev.sample', { mesh }), 1e-4, 'without the plan');

    expect(hf.parallelize(model, mesh, hf.fluxParallelPlan)).toBe(model);
    hf.parallelize(model, mesh, hf.fluxParallelPlan); // again: the hooks replaced, not doubled
    const again = model.call(hidden, options);
    expect(seen.pop(), 'split again').toBe('S(1)');
    expect((await bytes(again)).equals(await bytes(planned)), 'the same bits as the constructor\'s plan').toBe(true);
    dt.dispose([planned, plain, again, hidden, ...Object.values(options)]);
    model.dispose();
  });
});

describe('SD3Transformer2DModel on ring=2 x ulysses=2', () => {
  it('equals its plan taken off and put on again; off, one device with no ring attention', async () => {
    const io = readSafetensorsHeader(folder('sd3_io.safetensors'));
    const mesh = dt.initDeviceMesh('cpu', [2, 2], ['ring', 'ulysses']);
    const model = await hf.SD3Transformer2DModel.fromPretrained(folder('sd3.5'), { mesh, subfolder: 'transformer' });
    const t = (key: string) => fixtureTensor(io, `sd3.5.${key}`, { mesh });
    const x = t('hidden_states');
    const options = { encoderHiddenStates: t('encoder_hidden_states'), pooledProjections: t('pooled_projections'), timestep: t('timestep') };
    const attn = model.transformer_blocks.at(-1).attn;
    const seen = watchInput(attn);
    const attentions = model.transformer_blocks.length + 1; // sd3.5's block 0 has attn2
    let planned: dt.Tensor | undefined;
    expect(countRecords('ring_attention', () => void (planned = model.call(x, options)))).toBe(attentions);
    expect(seen.pop(), 'the image tokens split on both dims').toBe('S(1),S(1)');

    hf.removeContextParallel(model);
    leftSingleDevice(model, attn);
    let plain: dt.Tensor | undefined;
    expect(countRecords('ring_attention', () => void (plain = model.call(x, options)))).toBe(0);
    expect(seen.pop()).toBe('R,R');
    await expectClose(plain!, fixtureTensor(io, 'sd3.5.sample', { mesh }), 1e-4, 'without the plan');

    hf.parallelize(model, mesh, hf.sd3ParallelPlan);
    const again = model.call(x, options);
    expect(seen.pop()).toBe('S(1),S(1)');
    expect((await bytes(again)).equals(await bytes(planned!))).toBe(true);
    dt.dispose([planned!, plain!, again, x, ...Object.values(options)]);
    model.dispose();
  });
});

// A model a user writes: embed the tokens, one nonlinearity, project out
class Toy extends hf.nn.Module {
  x_embedder: hf.nn.Linear;
  proj_out: hf.nn.Linear;
  constructor(mesh: dt.DeviceMesh) {
    super();
    this.x_embedder = new hf.nn.Linear(4, 8, { mesh });
    this.proj_out = new hf.nn.Linear(8, 4, { mesh });
  }
  forward(x: dt.Tensor): dt.Tensor {
    return this.proj_out.forward(dt.F.gelu(this.x_embedder.forward(x)));
  }
}

const toyPlan: hf.ParallelPlan = {
  tp: { x_embedder: 'colwise', proj_out: 'rowwise' },
  cp: { modules: { x_embedder: { inputs: { 0: { tokens: 1, batch: true } } }, proj_out: { gatherOutput: true } } },
};

describe('a plan a new model declares', () => {
  it.each([
    { name: 'dp=2 x ulysses=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['dp', 'ulysses']), inside: 'S(0),S(1)', out: 'S(0),R' },
    { name: 'tp=2 x ring=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['tp', 'ring']), inside: 'R,S(1)', out: 'R,R' },
  ])('$name: splits, gathers and shards where it says, equal to the model without it', async ({ make, inside, out }) => {
    const mesh = make();
    const x = dt.randn([2, 6, 4], { seed: 1, mesh });
    const toy = new Toy(mesh);
    const plain = toy.call(x);
    hf.parallelize(toy, mesh, toyPlan); // the layers split over 'tp' keep their values
    const seen = watchInput(toy.proj_out);
    const planned = toy.call(x);
    expect(seen.pop()?.split(',').filter((_, d) => mesh.dimNames![d] !== 'tp').join(), 'proj_out sees its share').toBe(inside.split(',').filter((_, d) => mesh.dimNames![d] !== 'tp').join());
    expect(placements(planned)).toBe(out);
    if (mesh.dimNames!.includes('tp')) expect(placements(toy.x_embedder.weight)).toBe('S(0),R');
    await expectClose(planned, plain.redistribute(planned.placements), 1e-6, 'toy');
    hf.removeContextParallel(toy);
    leftSingleDevice(toy, toy.proj_out);
    dt.dispose([x, plain, planned]);
    toy.dispose();
  });

  it('none: the model runs replicated on any mesh', async () => {
    const mesh = dt.initDeviceMesh('cpu', [2, 2], ['dp', 'ulysses']);
    const toy = new Toy(mesh);
    const x = dt.randn([2, 6, 4], { seed: 1, mesh });
    const seen = watchInput(toy.proj_out);
    expect(hf.parallelize(toy, mesh, {})).toBe(toy);
    const y = toy.call(x);
    expect([seen.pop(), placements(y)]).toEqual(['R,R', 'R,R']);
    dt.dispose([x, y]);
    toy.dispose();
  });

  it('refuses bad arguments with a DTorchError, changing nothing', () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1], ['ulysses']);
    const toy = new Toy(mesh);
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        return dt.isDTorchError(err) ? err.code : String(err);
      }
      return 'no error';
    };
    expect(code(() => hf.parallelize({} as hf.nn.Module, mesh, toyPlan))).toBe('INVALID_ARGUMENT');
    expect(code(() => hf.parallelize(toy, 'cpu' as never, toyPlan))).toBe('INVALID_ARGUMENT');
    expect(code(() => hf.parallelize(toy, mesh, null as never))).toBe('INVALID_ARGUMENT');
    expect(code(() => hf.parallelize(toy, mesh, { cp: {} as never }))).toBe('INVALID_ARGUMENT');
    expect(() => hf.parallelize(toy, mesh, null as never)).toThrow(/parallelize plan/);
    expect(code(() => hf.parallelize(toy, mesh, { tp: { x_embedder: 'colwize' as never } }))).toBe('INVALID_ARGUMENT');
    expect(() => hf.parallelize(toy, mesh, { cp: { modules: { x_embedder: { inputs: { 0: { tokens: 'one' as never } } } } } })).toThrow(/"x_embedder" inputs.0.tokens/);
    expect(() => hf.parallelize(toy, mesh, { cp: { modules: { proj_out: { gather: true } as never } } })).toThrow(/Unknown option "gather"/);
    leftSingleDevice(toy);
    // a layer without the form asked for: refused before any layer is replaced
    const tp = new dt.DeviceMesh('cpu', [0, 1], ['tp']);
    const withNorm = Object.assign(new Toy(tp), { norm: new hf.nn.LayerNorm(4, { mesh: tp }) });
    const embedder = withNorm.x_embedder;
    expect(() => hf.parallelize(withNorm, tp, { tp: { x_embedder: 'colwise', norm: 'rowwise' } })).toThrow(/"norm" is a LayerNorm, which has no "rowwise" form/);
    expect(withNorm.x_embedder).toBe(embedder);
    withNorm.dispose();
    expect(code(() => hf.checkHeadsDivide(hf.sd3ParallelPlan, new dt.DeviceMesh('cpu', [0, 1, 2], ['ulysses']), 'M', 'num_attention_heads', 4))).toBe('INVALID_MESH');
    expect(code(() => hf.checkHeadsDivide(hf.fluxParallelPlan, new dt.DeviceMesh('cpu', [0, 1, 2], ['ulysses']), 'M', 'num_attention_heads', 4)), 'Flux does not split heads over ulysses').toBe('no error');
    toy.dispose();
  });
});
