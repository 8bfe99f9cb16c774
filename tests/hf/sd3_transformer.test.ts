// SD3Transformer2DModel loaded with fromPretrained from the 'transformer' subfolders that
// diffusers' save_pretrained wrote (tools/reference/make_sd3_fixtures.py) gives diffusers'
// sample: float32 within 1e-4 of the largest reference value (max |got - want| / max |want|),
// SD3 and SD3.5 (qk rms norm, dual attention) style, on one CPU device, dp=2 (the batch split),
// tp=2 (heads and feed-forward features split), ulysses=2 (tokens split; 5 text tokens, so
// unevenly), dp=2 x ulysses=2 and tp=2 x ulysses=2, ring=2 (tokens split, the joint sequence
// joined piece by piece for ring attention), ring=2 x ulysses=2 and ulysses=2 x ring=2, dp=2 x
// ring=2 and tp=2 x ring=2; ring=4 against one device for 3 text tokens (its 5 do not join over
// 4 pieces: refused); in bfloat16 within 3e-2 of diffusers run in bfloat16; with skipLayers and
// ControlNet residuals too; also on CUDA meshes where present (x1, ulysses=2, ring=2). Bad inputs throw DTorchErrors at
// the call.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader } from '@dtorch/external';
import { countRecords } from '../count_records.js';
import { fixtureTensor } from '../fixture_tensors.js';
import { expectClose } from './expect_close.js';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';

const folder = (name: string) => fileURLToPath(new URL(`../fixtures/hf/models/${name}`, import.meta.url));
const io = readSafetensorsHeader(folder('sd3_io.safetensors'));
const load = (name: string, options: hf.FromPretrainedOptions = {}) => hf.SD3Transformer2DModel.fromPretrained(folder(name), { subfolder: 'transformer', ...options });

interface Inputs {
  hiddenStates: dt.Tensor;
  options: hf.SD3TransformerCallOptions;
}

function inputs(name: string, mesh: dt.DeviceMesh, dtype: dt.DType = 'float32'): Inputs {
  return dt.tidy(() => {
    const batch = hf.batchPlacements(mesh);
    const get = (key: string) => {
      const t = fixtureTensor(io, `${name}.${key}`, { mesh }).redistribute(batch);
      return dtype === 'float32' ? t : t.to(dtype);
    };
    return {
      hiddenStates: get('hidden_states'),
      options: { encoderHiddenStates: get('encoder_hidden_states'), pooledProjections: get('pooled_projections'), timestep: fixtureTensor(io, `${name}.timestep`, { mesh }).redistribute(batch) },
    };
  });
}


const disposeInputs = (x: Inputs) => dt.dispose([x.hiddenStates, x.options.encoderHiddenStates, x.options.pooledProjections, x.options.timestep as dt.Tensor]);

const models = ['sd3-medium', 'sd3.5'];
const meshes = [
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]) },
  { name: 'dp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['dp']) },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']) },
  { name: 'ulysses=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ulysses']) },
  { name: 'dp=2 x ulysses=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['dp', 'ulysses']) },
  // heads split over both dims: the sd3.5 fixture has 4 heads (sd3-medium's 2 cannot split in 4)
  { name: 'tp=2 x ulysses=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['tp', 'ulysses']), only: 'sd3.5' },
  { name: 'ring=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['ring']) },
  { name: 'ring=2 x ulysses=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['ring', 'ulysses']) },
  { name: 'ulysses=2 x ring=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['ulysses', 'ring']) },
  { name: 'dp=2 x ring=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['dp', 'ring']) },
  { name: 'tp=2 x ring=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['tp', 'ring']) },
  { name: `cuda x1${skipNote(cudaSkip(1))}`, make: () => cudaMesh(1), skip: cudaSkip(1) },
  { name: `cuda ulysses=2${skipNote(cudaSkip(2))}`, make: () => cudaMesh(2, ['ulysses']), skip: cudaSkip(2) },
  { name: `cuda ring=2${skipNote(cudaSkip(2))}`, make: () => cudaMesh(2, ['ring']), skip: cudaSkip(2) },
];

describe.each(meshes)('SD3Transformer2DModel on $name matches diffusers', ({ name: meshName, make, only, skip }) => {
  it.skipIf(skip ?? false).each(models.filter((m) => !only || m === only))('%s', async (name) => {
    const before = dt.memory().numTensors;
    const mesh = make();
    const model = await load(name, { mesh });
    if (meshName.startsWith('tp')) expect(model.transformer_blocks.at(0).attn.to_q.weight.placements.map(String)[0], 'q split by heads').toBe('S(0)');
    // on 'ulysses' / 'ring' the tokens stay split through every block: the last block's joint
    // attention and the sd3.5 fixture's attn2 (block 0) see their share of the image tokens
    const seen: string[][] = [];
    const blocks = [model.transformer_blocks.at(-1), model.transformer_blocks.at(0)];
    for (const attn of [blocks[0]!.attn, ...(blocks[1]!.attn2 ? [blocks[1]!.attn2] : [])]) {
      const forward = attn.forward.bind(attn);
      attn.forward = (t: dt.Tensor, context?: dt.Tensor) => (seen.push(t.placements.map(String)), forward(t, context));
    }
    const x = inputs(name, mesh);
    const ringAttentions = countRecords('ring_attention', () => dt.dispose(model.call(x.hiddenStates, x.options)));
    // every attention of the model (joint, and sd3.5's attn2) runs as ring attention on 'ring'
    const attentions = model.transformer_blocks.length + (name === 'sd3.5' ? 1 : 0);
    expect(ringAttentions, 'ring attentions').toBe(mesh.dimNames?.includes('ring') ? attentions : 0);
    seen.length = 0;
    const sample = model.call(x.hiddenStates, x.options);
    const sequenceDims = (mesh.dimNames ?? []).flatMap((n, d) => (n === 'ulysses' || n === 'ring' ? [d] : []));
    expect(seen.length).toBe(name === 'sd3.5' ? 2 : 1);
    for (const placements of seen) for (const d of sequenceDims) expect(placements[d], 'image tokens split on the sequence-parallel dims').toBe('S(1)');
    if (meshName.startsWith('dp')) expect(sample.placements.map(String)[0], 'the batch stays split').toBe('S(0)');
    await expectClose(sample, fixtureTensor(io, `${name}.sample`, { mesh }), 1e-4, `${name} sample`);
    const skipped = model.call(x.hiddenStates, { ...x.options, skipLayers: [0] });
    await expectClose(skipped, fixtureTensor(io, `${name}.skip_layers_0.sample`, { mesh }), 1e-4, `${name} skip_layers [0]`);
    const residual = dt.tidy(() => fixtureTensor(io, `${name}.controlnet.residual`, { mesh }).redistribute(hf.batchPlacements(mesh)));
    const controlled = model.call(x.hiddenStates, { ...x.options, blockControlnetHiddenStates: [residual] });
    await expectClose(controlled, fixtureTensor(io, `${name}.controlnet.sample`, { mesh }), 1e-4, `${name} controlnet`);
    dt.dispose([sample, skipped, residual, controlled]);
    disposeInputs(x);
    model.dispose();
    expect(dt.memory().numTensors, 'every tensor released').toBeLessThanOrEqual(before);
  });
});

describe('SD3Transformer2DModel', () => {
  it.each(models)('%s loaded as bfloat16 matches diffusers in bfloat16', async (name) => {
    const mesh = new dt.DeviceMesh('cpu', [0]);
    const model = await load(name, { mesh, dtype: 'bfloat16' });
    expect(model.parameters().every((p) => p.dtype === 'bfloat16')).toBe(true);
    const x = inputs(name, mesh, 'bfloat16');
    const sample = model.call(x.hiddenStates, x.options);
    expect(sample.dtype).toBe('bfloat16');
    await expectClose(sample, fixtureTensor(io, `${name}.bf16.sample`, { mesh }), 3e-2, `${name} bf16 sample`);
    dt.dispose(sample);
    disposeInputs(x);
    model.dispose();
  });

  // ring=4: the fixture's 5 text tokens are pieces 2, 2, 1, 0, which with 12 image tokens (3 a
  // piece) do not make torch.chunk's pieces of 17 (5, 5, 5, 2): refused at the call, naming the
  // sizes; 3 text tokens (1, 1, 1, 0 with 3, 3, 3, 3: 15's 4, 4, 4, 3) join, and equal one device
  it.each(models)('%s on ring=4 equals one device for 3 text tokens and refuses 5', async (name) => {
    const ring = new dt.DeviceMesh('cpu', [0, 1, 2, 3], ['ring']);
    const single = new dt.DeviceMesh('cpu', [0]);
    const [model, reference] = [await load(name, { mesh: ring }), await load(name, { mesh: single })];
    const [x, y] = [inputs(name, ring), inputs(name, single)];
    const before = dt.memory().numTensors;
    expect(() => model.call(x.hiddenStates, x.options)).toThrow(/join_shards: parts of lengths \[12, 5\] along dim 1, each in 4 pieces .*rank 2 holds 3 \+ 1 = 4 but torch.chunk gives it 5/);
    expect(dt.memory().numTensors, 'the refused call left nothing behind').toBe(before);
    const three = (o: hf.SD3TransformerCallOptions) => ({ ...o, encoderHiddenStates: o.encoderHiddenStates.narrow(1, 0, 3) });
    const [xo, yo] = [three(x.options), three(y.options)];
    const got = model.call(x.hiddenStates, xo);
    const want = reference.call(y.hiddenStates, yo);
    const [g, w] = [(await got.data()) as Float32Array, (await want.data()) as Float32Array];
    const error = Math.max(...g.map((v, i) => Math.abs(v - w[i]!))) / Math.max(...w.map(Math.abs));
    if (process.env.DTORCH_PRINT_ERRORS) console.log(`${name} ring=4, 3 text tokens: ${error.toExponential(2)}`);
    expect(error).toBeLessThanOrEqual(1e-5);
    dt.dispose([got, want, xo.encoderHiddenStates, yo.encoderHiddenStates]);
    disposeInputs(x);
    disposeInputs(y);
    model.dispose();
    reference.dispose();
  });

  it('runs packed from fromPretrained: every block\'s modulation in one matmul, q/k/v in one per stream; unpacked after a weight is replaced', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0]);
    const model = await load('sd3-medium', { mesh });
    const blocks = model.transformer_blocks.length;
    const x = inputs('sd3-medium', mesh);
    const records = () => ({ silu: countRecords('silu', () => dt.dispose(model.call(x.hiddenStates, x.options))), linear: countRecords('linear', () => dt.dispose(model.call(x.hiddenStates, x.options))) });
    const packed = records();
    // one SiLU of temb for all norms (time_text_embed's own besides)
    expect(packed.silu).toBeLessThanOrEqual(3);
    const want = () => fixtureTensor(io, 'sd3-medium.sample', { mesh });
    // a replaced weight: each norm and each projection runs on its own again, with the new value
    const norm1 = model.transformer_blocks.at(0).norm1;
    model.setTensor('transformer_blocks.0.norm1.linear.weight', dt.tidy(() => norm1.linear.weight.mul(1)));
    const unpacked = records();
    expect(unpacked.silu - packed.silu, 'a SiLU per norm').toBe(2 * blocks + 1 - 1);
    expect(unpacked.linear - packed.linear, 'a matmul per norm').toBe(2 * blocks + 1 - 1);
    await expectClose(model.call(x.hiddenStates, x.options), want(), 1e-4, 'unpacked');
    expect(model.packProjections()).toBeGreaterThan(0);
    expect(records()).toEqual(packed);
    await expectClose(model.call(x.hiddenStates, x.options), want(), 1e-4, 'packed again');
    dt.dispose([x.hiddenStates, ...Object.values(x.options)]);
    model.dispose();
  });

  it('computes the position embedding diffusers saves (pos_embed.pos_embed)', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0]);
    const loaded = await load('sd3-medium', { mesh });
    const built = new hf.SD3Transformer2DModel(loaded.config, { mesh });
    expect(built.pos_embed.pos_embed.shape).toEqual([1, 256, 16]);
    const [a, b] = [(await built.pos_embed.pos_embed.data()) as Float32Array, (await loaded.pos_embed.pos_embed.data()) as Float32Array];
    expect(Math.max(...a.map((v, i) => Math.abs(v - b[i]!)))).toBeLessThan(1e-6);
    built.dispose();
    loaded.dispose();
  });

  // the released checkpoints' configs give diffusers' state-dict keys and shapes, key for key
  // (built without values: nothing is allocated)
  const released = JSON.parse(readFileSync(folder('sd3_state_dict_shapes.json'), 'utf8')) as Record<string, { config: Record<string, number>; keys: Record<string, number[]> }>;
  it.each(Object.keys(released))('has the keys and shapes of diffusers for the %s config', (name) => {
    const { config, keys } = released[name]!;
    const model = hf.nn.skipInit(() => new hf.SD3Transformer2DModel(hf.SD3Transformer2DConfig.fromDict(config), { mesh: new dt.DeviceMesh('cpu', [0]) }));
    const ours = Object.fromEntries([...model.namedParameters(), ...model.namedBuffers()].map(([k, t]) => [k, [...t.shape]]));
    expect(ours).toEqual(keys);
    model.dispose();
  });

  it('reads diffusers config keys and defaults', () => {
    const c = hf.SD3Transformer2DConfig.fromDict({});
    expect([c.sampleSize, c.patchSize, c.inChannels, c.numLayers, c.attentionHeadDim, c.numAttentionHeads]).toEqual([128, 2, 16, 18, 64, 18]);
    expect([c.jointAttentionDim, c.captionProjectionDim, c.pooledProjectionDim, c.outChannels, c.posEmbedMaxSize]).toEqual([4096, 1152, 2048, 16, 96]);
    expect(c.dualAttentionLayers).toEqual([]);
    expect(c.qkNorm).toBeNull();
    const sd35 = hf.SD3Transformer2DConfig.fromFile(`${folder('sd3.5')}/transformer/config.json`);
    expect([sd35.qkNorm, sd35.dualAttentionLayers, sd35.innerDim]).toEqual(['rms_norm', [0], 16]);
    expect(sd35.extra['_class_name']).toBe('SD3Transformer2DModel');
    expect(() => hf.SD3Transformer2DConfig.fromDict({ qk_norm: 'l2' })).toThrow(/"qk_norm" must be null or one of "rms_norm", "layer_norm"; got/);
    expect(() => hf.SD3Transformer2DConfig.fromDict({ dual_attention_layers: [0, 'x'] })).toThrow(/"dual_attention_layers" must be an array of layer indices/);
    expect(() => hf.SD3Transformer2DConfig.fromDict({ caption_projection_dim: 1536 })).toThrow(/"caption_projection_dim" must be num_attention_heads \* attention_head_dim \(1152\)/);
  });

  it('checks its inputs at the call', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0]);
    const model = await load('sd3-medium', { mesh });
    const x = inputs('sd3-medium', mesh);
    const bad = (h: dt.Tensor, o: Partial<hf.SD3TransformerCallOptions>) => () => dt.tidy(() => model.call(h, { ...x.options, ...o } as hf.SD3TransformerCallOptions));
    const code = (fn: () => unknown, c: string, message: RegExp) => {
      expect(fn).toThrow(message);
      try {
        fn();
      } catch (err) {
        expect(dt.isDTorchError(err), String(err)).toBe(true);
        expect((err as dt.DTorchError).code).toBe(c);
      }
    };
    dt.tidy(() => {
      code(bad(dt.zeros([2, 3, 8, 6], { mesh }), {}), 'SHAPE_MISMATCH', /hiddenStates must be latents \[batch, 4, height, width\], got/);
      code(bad(dt.zeros([2, 4, 7, 6], { mesh }), {}), 'SHAPE_MISMATCH', /\(7 x 6\) must be multiples of patch_size 2/);
      code(bad(dt.zeros([2, 4, 34, 6], { mesh }), {}), 'SHAPE_MISMATCH', /pos_embed_max_size 16 allows at most 32 a side/);
      code(bad(x.hiddenStates, { encoderHiddenStates: dt.zeros([2, 5, 12], { mesh }) }), 'SHAPE_MISMATCH', /encoderHiddenStates must be \[2, tokens, 16\]/);
      code(bad(x.hiddenStates, { encoderHiddenStates: undefined }), 'INVALID_ARGUMENT', /encoderHiddenStates .* is required/);
      code(bad(x.hiddenStates, { pooledProjections: dt.zeros([3, 8], { mesh }) }), 'SHAPE_MISMATCH', /pooledProjections must be \[2, 8\]/);
      code(bad(x.hiddenStates, { timestep: [1, 2, 3] }), 'INVALID_ARGUMENT', /timestep/);
      code(bad(x.hiddenStates, { timestep: dt.zeros([3], { mesh }) }), 'SHAPE_MISMATCH', /timestep must be \[2\]/);
      code(bad(x.hiddenStates, { skipLayers: [2] }), 'INVALID_ARGUMENT', /skipLayers/);
      code(bad(x.hiddenStates, { blockControlnetHiddenStates: [dt.zeros([2, 11, 16], { mesh })] }), 'SHAPE_MISMATCH', /blockControlnetHiddenStates\[0\] must be \[2, 12, 16\]/);
      const other = new dt.DeviceMesh('cpu', [1]);
      code(bad(dt.zeros([2, 4, 8, 6], { mesh: other }), {}), 'MESH_MISMATCH', /hiddenStates is on .* but the model on/);
    });
    const config = model.config;
    code(() => new hf.SD3Transformer2DModel(config, { mesh: new dt.DeviceMesh('cpu', [0, 1, 2, 3], ['ulysses']) }), 'INVALID_MESH', /num_attention_heads 2 cannot be split over the mesh dim 'ulysses' of size 4/);
    code(() => new hf.SD3Transformer2DModel(config, { mesh: new dt.DeviceMesh('cpu', [0, 1, 2, 3], ['tp']) }), 'INVALID_MESH', /num_attention_heads 2 cannot be split over the mesh dim 'tp' of size 4/);
    // one timestep for every sample, as a number, gives what the [B] tensor of equal values does
    const a = model.call(x.hiddenStates, { ...x.options, timestep: 500 });
    const b = dt.tidy(() => model.call(x.hiddenStates, { ...x.options, timestep: dt.full([2], 500, { mesh }) }));
    expect(Array.from((await a.data()) as Float32Array)).toEqual(Array.from((await b.data()) as Float32Array));
    dt.dispose([a, b]);
    disposeInputs(x);
    model.dispose();
  });
});
