// The T5 and CLIP text encoders loaded with fromPretrained from folders that transformers'
// save_pretrained wrote (tools/reference/make_hf_model_fixtures.py) give transformers' outputs:
// float32 within 1e-4 of the largest reference value (max |got - want| / max |want|), on one
// CPU device, tp=2, tp=4 and dp=2 x tp=2; loaded as bfloat16 from the float32 checkpoint
// (converted while loading) within 3e-2 of transformers run in bfloat16 (8-bit mantissas,
// rounded at every op of two layers); T5 as float16 within 1e-2, with `wo` kept in float32; CLIP
// on rows padded with the end-of-text token (SD3's tokenizers) pools at the first one.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { readSafetensorsHeader } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { expectClose } from './expect_close.js';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';

const folder = (name: string) => fileURLToPath(new URL(`../fixtures/hf/models/${name}`, import.meta.url));
const io = readSafetensorsHeader(`${folder('io.safetensors')}`);

const reference = (name: string, mesh: dt.DeviceMesh) => fixtureTensor(io, name, { mesh });

interface MeshCase {
  name: string;
  make: () => dt.DeviceMesh;
  skip: string | false;
}

const meshes: MeshCase[] = [
  { name: '1 cpu device', make: () => new dt.DeviceMesh('cpu', [0]), skip: false },
  { name: 'tp=2', make: () => new dt.DeviceMesh('cpu', [0, 1], ['tp']), skip: false },
  { name: 'tp=4', make: () => new dt.DeviceMesh('cpu', [0, 1, 2, 3], ['tp']), skip: false },
  { name: 'dp=2 x tp=2', make: () => dt.initDeviceMesh('cpu', [2, 2], ['dp', 'tp']), skip: false },
  { name: `cuda x1${skipNote(cudaSkip(1))}`, make: () => cudaMesh(1), skip: cudaSkip(1) },
  { name: `cuda tp=2${skipNote(cudaSkip(2))}`, make: () => cudaMesh(2, ['tp']), skip: cudaSkip(2) },
];

type Encoder = hf.T5EncoderModel | hf.CLIPTextModel | hf.CLIPTextModelWithProjection;
interface ModelCase {
  name: string;
  load: (options: hf.FromPretrainedOptions) => Promise<Encoder>;
  /** The pooled output's fixture name and output field. */
  pooled?: ['pooler_output', 'poolerOutput'] | ['text_embeds', 'textEmbeds'];
  layers: number;
}

const models: ModelCase[] = [
  { name: 't5-v1_0', load: (o) => hf.T5EncoderModel.fromPretrained(folder('t5-v1_0'), o), layers: 2 },
  { name: 't5-v1_1', load: (o) => hf.T5EncoderModel.fromPretrained(folder('t5-v1_1'), o), layers: 2 },
  { name: 'clip', load: (o) => hf.CLIPTextModel.fromPretrained(folder('clip'), o), pooled: ['pooler_output', 'poolerOutput'], layers: 2 },
  { name: 'clip-projection', load: (o) => hf.CLIPTextModelWithProjection.fromPretrained(folder('clip-projection'), o), pooled: ['text_embeds', 'textEmbeds'], layers: 2 },
];

type Outputs = { lastHiddenState: dt.Tensor; poolerOutput?: dt.Tensor; textEmbeds?: dt.Tensor; hiddenStates?: dt.Tensor[] };
const run = (model: Encoder, ids: dt.Tensor, options?: object): Outputs => (model as hf.CLIPTextModel).call(ids, options) as Outputs;

describe.each(meshes)('text encoders on $name match transformers', ({ make, skip }) => {
  it.skipIf(skip).each(models)('$name', async ({ name, load, pooled, layers }) => {
    const before = dt.memory().numTensors;
    const mesh = make();
    const model = await load({ mesh });
    const batch = hf.batchPlacements(mesh);
    const [ids, mask] = dt.tidy(() => [reference(`${name}.input_ids`, mesh).redistribute(batch), reference(`${name}.attention_mask`, mesh).redistribute(batch)]);
    if (mesh.dimNames?.includes('tp')) {
      const projection = name.startsWith('t5') ? (model as hf.T5EncoderModel).encoder.block.at(0).selfAttention.SelfAttention.q : (model as hf.CLIPTextModel).text_model.encoder.layers.at(0).self_attn.q_proj;
      expect(projection.weight.placements.map(String), 'q is split by heads over tp').toContain('S(0)');
    }

    const plain = run(model, ids);
    await expectClose(plain.lastHiddenState, reference(`${name}.last_hidden_state`, mesh), 1e-4, `${name} last_hidden_state`);
    if (pooled) await expectClose(plain[pooled[1]]!, reference(`${name}.${pooled[0]}`, mesh), 1e-4, `${name} ${pooled[0]}`);

    const masked = run(model, ids, { attentionMask: mask, ...(pooled ? { outputHiddenStates: true } : {}) });
    await expectClose(masked.lastHiddenState, reference(`${name}.masked.last_hidden_state`, mesh), 1e-4, `${name} masked last_hidden_state`);
    if (pooled) {
      await expectClose(masked[pooled[1]]!, reference(`${name}.masked.${pooled[0]}`, mesh), 1e-4, `${name} masked ${pooled[0]}`);
      expect(masked.hiddenStates).toHaveLength(layers + 1);
      for (const [i, h] of masked.hiddenStates!.entries()) await expectClose(h, reference(`${name}.hidden_states.${i}`, mesh), 1e-4, `${name} hidden_states[${i}]`);
    }
    dt.dispose([plain, masked, ids, mask]);
    model.dispose();
    expect(dt.memory().numTensors, 'every tensor released').toBeLessThanOrEqual(before);
  });
});

// rows padded with the end-of-text token itself, as SD3's CLIP tokenizers pad (no mask, as SD3
// runs its CLIPs): several end-of-text tokens a row, the pooled output is the first one's
describe.each([meshes[0]!, meshes[1]!, meshes[4]!])('CLIP on rows padded with end-of-text on $name', ({ make, skip }) => {
  it.skipIf(skip).each(models.filter((m) => m.pooled))('$name pools at the first end-of-text token', async ({ name, load, pooled }) => {
    const mesh = make();
    const model = await load({ mesh });
    const ids = reference(`${name}.eos_padded.input_ids`, mesh);
    const out = run(model, ids);
    await expectClose(out.lastHiddenState, reference(`${name}.eos_padded.last_hidden_state`, mesh), 1e-4, `${name} eos-padded last_hidden_state`);
    await expectClose(out[pooled![1]]!, reference(`${name}.eos_padded.${pooled![0]}`, mesh), 1e-4, `${name} eos-padded ${pooled![0]}`);
    dt.dispose([out, ids]);
    model.dispose();
  });
});

describe.each([meshes[0]!, meshes[1]!, meshes[4]!])('text encoders loaded as bfloat16 on $name', ({ make, skip }) => {
  it.skipIf(skip).each(models)('$name', async ({ name, load }) => {
    const mesh = make();
    const model = await load({ mesh, dtype: 'bfloat16' });
    expect([...model.parameters()].every((p) => p.dtype === 'bfloat16')).toBe(true);
    const [ids, mask] = [reference(`${name}.input_ids`, mesh), reference(`${name}.attention_mask`, mesh)];
    const out = run(model, ids, { attentionMask: mask });
    expect(out.lastHiddenState.dtype).toBe('bfloat16');
    await expectClose(out.lastHiddenState, reference(`${name}.bf16.last_hidden_state`, mesh), 3e-2, `${name} bf16`);
    dt.dispose([out, ids, mask]);
    model.dispose();
  });
});

// float16 as transformers' from_pretrained loads T5: `wo` kept in float32 (_keep_in_fp32_modules),
// so the residual stream after the first feed-forward is float32 and the final norm's output
// float16; within 1e-2 of transformers (10-bit mantissas)
describe.each([meshes[0]!, meshes[1]!, meshes[4]!])('T5 loaded as float16 on $name', ({ make, skip }) => {
  it.skipIf(skip).each(models.filter((m) => m.name.startsWith('t5')))('$name', async ({ name, load }) => {
    const mesh = make();
    const model = (await load({ mesh, dtype: 'float16' })) as hf.T5EncoderModel;
    const ff = model.encoder.block.at(0).layer.at(1) as unknown as { DenseReluDense: { wo: { weight: dt.Tensor } } };
    expect(ff.DenseReluDense.wo.weight.dtype).toBe('float32');
    expect(model.shared.weight.dtype).toBe('float16');
    const [ids, mask] = [reference(`${name}.input_ids`, mesh), reference(`${name}.attention_mask`, mesh)];
    const out = model.call(ids, { attentionMask: mask });
    expect(out.lastHiddenState.dtype).toBe('float16');
    await expectClose(out.lastHiddenState, reference(`${name}.fp16.last_hidden_state`, mesh), 1e-2, `${name} fp16`);
    dt.dispose([out, ids, mask]);
    model.dispose();
  });
});
