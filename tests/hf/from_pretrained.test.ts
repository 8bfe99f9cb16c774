// fromPretrained's folder handling and its errors: a diffusers layout through `subfolder`, a
// tied embedding saved under its twin's name, and a clear DTorchError (code, file, key, what
// to do) for a bad config, missing files, another model's weights, unknown options and a mesh
// the heads cannot be split over. A call that throws leaves no tensor behind.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import * as nn from '@dtorch/nn';
import { readSafetensorsHeader, readTensorBytes } from '@dtorch/external';

const fixture = (name: string) => fileURLToPath(new URL(`../fixtures/hf/models/${name}`, import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'dtorch-hf-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let folders = 0;
/** A copy of fixture model `name` in a fresh folder, changed by `edit`. */
function copyOf(name: string, edit: (dir: string) => void = () => {}): string {
  const dir = join(scratch, `${folders++}-${name}`);
  cpSync(fixture(name), dir, { recursive: true });
  edit(dir);
  return dir;
}

function editConfig(dir: string, change: (config: Record<string, unknown>) => void): void {
  const path = join(dir, 'config.json');
  const config = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  change(config);
  writeFileSync(path, JSON.stringify(config));
}

async function expectError(promise: Promise<unknown>, code: string, ...parts: (string | RegExp)[]): Promise<void> {
  const before = dt.memory().numTensors;
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, 'it throws').toBeInstanceOf(dt.DTorchError);
  expect((err as dt.DTorchError).code).toBe(code);
  for (const part of parts) expect((err as Error).message).toMatch(part);
  expect(dt.memory().numTensors, 'nothing left behind').toBeLessThanOrEqual(before);
}

describe('fromPretrained', () => {
  it('reads a diffusers pipeline layout through subfolder, and says which subfolders there are when none is given', async () => {
    const pipeline = join(scratch, 'pipeline');
    cpSync(fixture('clip'), join(pipeline, 'text_encoder'), { recursive: true });
    cpSync(fixture('t5-v1_1'), join(pipeline, 'text_encoder_3'), { recursive: true });
    writeFileSync(join(pipeline, 'model_index.json'), JSON.stringify({ _class_name: 'StableDiffusion3Pipeline', text_encoder: ['transformers', 'CLIPTextModel'] }));
    const clip = await hf.CLIPTextModel.fromPretrained(pipeline, { subfolder: 'text_encoder' });
    expect(clip.config.hiddenSize).toBe(32);
    const t5 = await hf.T5EncoderModel.fromPretrained(pipeline, { subfolder: 'text_encoder_3' });
    expect(t5.config.isGatedAct).toBe(true);
    clip.dispose();
    t5.dispose();
    await expectError(hf.CLIPTextModel.fromPretrained(pipeline), 'NOT_FOUND', 'has no config.json', 'diffusers pipeline', 'text_encoder, text_encoder_3');
  });

  it('takes the config dtype unless dtype is given', async () => {
    const dir = copyOf('clip', (d) => editConfig(d, (c) => (c['dtype'] = 'bfloat16')));
    const model = await hf.CLIPTextModel.fromPretrained(dir);
    expect(new Set(model.parameters().map((p) => p.dtype))).toEqual(new Set(['bfloat16']));
    model.dispose();
    const asked = await hf.CLIPTextModel.fromPretrained(dir, { dtype: 'float32' });
    expect(new Set(asked.parameters().map((p) => p.dtype))).toEqual(new Set(['float32']));
    asked.dispose();
  });

  it("loads T5's tied embedding saved as encoder.embed_tokens.weight (older checkpoints)", async () => {
    const dir = copyOf('t5-v1_0');
    const file = join(dir, 'model.safetensors');
    const header = readSafetensorsHeader(file);
    const tensors = new Map<string, dt.Tensor>();
    for (const [name, entry] of header.tensors) {
      tensors.set(name === 'shared.weight' ? 'encoder.embed_tokens.weight' : name, dt.fromBuffer(readTensorBytes(header, name), 'float32', entry.shape));
    }
    await nn.saveSafetensors(file, tensors);
    expect(readSafetensorsHeader(file).tensors.has("shared.weight")).toBe(false);
    dt.dispose([...tensors.values()]);
    const [original, renamed] = [await hf.T5EncoderModel.fromPretrained(fixture('t5-v1_0')), await hf.T5EncoderModel.fromPretrained(dir)];
    const ids = [[5, 9, 1]];
    const [a, b] = [original.call(ids).lastHiddenState, renamed.call(ids).lastHiddenState];
    expect(await b.data()).toEqual(await a.data());
    expect(renamed.encoder.embed_tokens).toBe(renamed.shared);
    dt.dispose([a, b]);
    original.dispose();
    renamed.dispose();
  });

  it('gives a BAD_CONFIG error naming the file and the key for a value of the wrong type', async () => {
    const dir = copyOf('t5-v1_0', (d) => editConfig(d, (c) => (c['d_model'] = 'wide')));
    await expectError(hf.T5EncoderModel.fromPretrained(dir), 'BAD_CONFIG', join(dir, 'config.json'), '"d_model" must be an integer', 'got "wide"');
    const act = copyOf('t5-v1_0', (d) => editConfig(d, (c) => (c['feed_forward_proj'] = 'gated-gelu-new')));
    await expectError(hf.T5EncoderModel.fromPretrained(act), 'BAD_CONFIG', '"feed_forward_proj" must be of the form');
    const unknownAct = copyOf('clip', (d) => editConfig(d, (c) => (c['hidden_act'] = 'swoosh')));
    await expectError(hf.CLIPTextModel.fromPretrained(unknownAct), 'BAD_CONFIG', '"hidden_act" must be a known name', 'quick_gelu', 'got "swoosh"');
    const broken = copyOf('clip', (d) => writeFileSync(join(d, 'config.json'), '{"hidden_size": 32,'));
    await expectError(hf.CLIPTextModel.fromPretrained(broken), 'BAD_CONFIG', 'not valid JSON');
  });

  it('gives NOT_FOUND errors naming what is missing', async () => {
    await expectError(hf.T5EncoderModel.fromPretrained(join(scratch, 'nowhere')), 'INVALID_ARGUMENT', 'nowhere" is neither a folder on this machine nor a hub id');
    const noWeights = copyOf('clip', (d) => rmSync(join(d, 'model.safetensors')));
    await expectError(hf.CLIPTextModel.fromPretrained(noWeights), 'NOT_FOUND', 'has no safetensors weights', 'model.safetensors, model.safetensors.index.json');
    const pickle = copyOf('clip', (d) => {
      rmSync(join(d, 'model.safetensors'));
      writeFileSync(join(d, 'pytorch_model.bin'), 'pickle');
    });
    await expectError(hf.CLIPTextModel.fromPretrained(pickle), 'NOT_FOUND', 'only pytorch_model.bin', 'safe_serialization=True');
    const lostShard = copyOf('t5-v1_1', (d) => rmSync(join(d, 'model-00002-of-00002.safetensors')));
    await expectError(hf.T5EncoderModel.fromPretrained(lostShard), 'NOT_FOUND', 'model-00002-of-00002.safetensors');
  });

  it("refuses another model's weights, naming the keys it lacks", async () => {
    const dir = copyOf('clip', (d) => cpSync(join(fixture('t5-v1_0'), 'config.json'), join(d, 'config.json')));
    await expectError(hf.T5EncoderModel.fromPretrained(dir), 'BAD_FILE', 'lacks weights of T5EncoderModel', '"shared.weight"');
  });

  it('refuses unknown options and a tp size that does not divide the heads', async () => {
    await expectError(hf.T5EncoderModel.fromPretrained(fixture('t5-v1_0'), { subFolder: 'x' } as object), 'INVALID_ARGUMENT', 'Unknown option "subFolder" in T5EncoderModel.fromPretrained options', 'subfolder');
    await expectError(hf.T5EncoderModel.fromPretrained(fixture('t5-v1_0'), { dtype: 'float8' as dt.DType }), 'UNKNOWN_DTYPE');
    const mesh = new dt.DeviceMesh('cpu', [0, 1, 2], ['tp']);
    await expectError(hf.CLIPTextModel.fromPretrained(fixture('clip'), { mesh }), 'INVALID_MESH', 'num_attention_heads 4', "'tp' of size 3");
  });

  it('checks call inputs', async () => {
    const model = await hf.CLIPTextModel.fromPretrained(fixture('clip'));
    expect(() => model.call([[1, 2], [3]])).toThrow(/equal-length arrays of token ids/);
    expect(() => model.call([Array.from({ length: 21 }, () => 1)])).toThrow(/21 tokens, but the model has 20 positions/);
    const elsewhere = dt.tensor([[1, 2]], { dtype: 'int64', mesh: new dt.DeviceMesh('cpu', [1]) });
    expect(() => model.call(elsewhere)).toThrow(/is on .* but the model on/);
    elsewhere.dispose();
    model.dispose();
  });
});
