// fromPretrained from a hub id, end to end: a diffusers-style pipeline repository (model_index,
// text_encoder_3 with a 2-shard T5 checkpoint, tokenizer_3, and files no loader needs) served by
// a fake hub on 127.0.0.1. The model and tokenizer download only what they read into the HF
// cache, give the same outputs as from the folder, never download a file twice, and load again
// offline with no request at all.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { sha1Hex, type FakeFile } from '../../packages/external/test/fake_hub.js';
import { tempDir, useFakeHub } from '../../packages/external/test/hub_env.js';

const fixtures = fileURLToPath(new URL('../fixtures/hf/', import.meta.url));
const REPO = 'tiny-org/tiny-pipeline';

// every file under `folder` as the repository's `prefix/...` (gzipped fixtures served unzipped)
function filesOf(folder: string, prefix: string): FakeFile[] {
  return readdirSync(folder).map((name) => {
    const bytes = readFileSync(join(folder, name));
    const path = `${prefix}/${name.replace(/\.gz$/, '')}`;
    return { path, content: new Uint8Array(name.endsWith('.gz') ? gunzipSync(bytes) : bytes), lfs: name.includes('.safetensors') && !name.endsWith('.json') };
  });
}

const repoFiles: FakeFile[] = [
  { path: 'model_index.json', content: new Uint8Array(Buffer.from('{"_class_name":"StableDiffusion3Pipeline","text_encoder_3":["transformers","T5EncoderModel"]}')) },
  { path: 'README.md', content: new Uint8Array(Buffer.from('# a pipeline\n')) },
  ...filesOf(join(fixtures, 'models', 't5-v1_1'), 'text_encoder_3'),
  { path: 'text_encoder_3/pytorch_model.bin', content: new Uint8Array(4096) }, // a loader must not fetch it
  ...filesOf(join(fixtures, 'tokenizers', 't5-hub'), 'tokenizer_3'),
];

const fake = useFakeHub(() => [{ id: REPO, revisions: { main: { commit: sha1Hex('pipeline main'), files: repoFiles } } }]);
const cacheDir = tempDir('hub-cache');
const downloaded = () => fake.hub.requests.filter((r) => (r.route === 'resolve' || r.route === 'cdn') && r.method === 'GET' && r.range === undefined).map((r) => r.file);

describe('fromPretrained from the hub', () => {
  it('downloads only what the model and tokenizer read, and gives what the folder gives', async () => {
    const options = { hubUrl: fake.hub.url, cacheDir };
    const t5 = await hf.T5EncoderModel.fromPretrained(REPO, { ...options, subfolder: 'text_encoder_3' });
    const tokenizer = await hf.AutoTokenizer.fromPretrained(REPO, { ...options, subfolder: 'tokenizer_3' });
    const files = [...new Set(downloaded())].sort();
    expect(files).toEqual([
      'text_encoder_3/config.json',
      'text_encoder_3/model-00001-of-00002.safetensors',
      'text_encoder_3/model-00002-of-00002.safetensors',
      'text_encoder_3/model.safetensors.index.json',
      'tokenizer_3/tokenizer.json',
      'tokenizer_3/tokenizer_config.json',
    ]);
    const snapshot = join(cacheDir, 'models--tiny-org--tiny-pipeline', 'snapshots', sha1Hex('pipeline main'));
    expect(statSync(join(snapshot, 'text_encoder_3', 'model-00002-of-00002.safetensors')).isFile()).toBe(true);

    const local = await hf.T5EncoderModel.fromPretrained(join(fixtures, 'models', 't5-v1_1'));
    const { inputIds: tokens, attentionMask } = await tokenizer.encode(['a photo of a cat'], { padding: 'max_length', maxLength: 12, truncation: true });
    const inputIds = tokens.map((row) => row.map((id) => id % t5.config.vocabSize)); // the tiny model's vocabulary is smaller
    const [a, b] = [t5.call(inputIds, { attentionMask }).lastHiddenState, local.call(inputIds, { attentionMask }).lastHiddenState];
    expect(await a.data()).toEqual(await b.data());
    dt.dispose([a, b]);
    for (const m of [t5, local]) m.dispose();
  });

  it('never downloads a file again, and loads offline with no request', async () => {
    const before = downloaded().length;
    const again = await hf.T5EncoderModel.fromPretrained(REPO, { hubUrl: fake.hub.url, cacheDir, subfolder: 'text_encoder_3' });
    expect(downloaded().length).toBe(before);
    again.dispose();
    const requests = fake.hub.requests.length;
    const offline = await hf.T5EncoderModel.fromPretrained(REPO, { hubUrl: fake.hub.url, cacheDir, subfolder: 'text_encoder_3', localFilesOnly: true });
    const tokenizer = await hf.AutoTokenizer.fromPretrained(REPO, { hubUrl: fake.hub.url, cacheDir, subfolder: 'tokenizer_3', localFilesOnly: true });
    expect(fake.hub.requests.length).toBe(requests);
    expect(tokenizer.eosTokenId).toBe(1);
    offline.dispose();
  });

  it('names the repository and file of what is missing on the hub', async () => {
    const err = await hf.CLIPTextModel.fromPretrained(REPO, { hubUrl: fake.hub.url, cacheDir, subfolder: 'text_encoder' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(dt.DTorchError);
    expect((err as dt.DTorchError).code).toBe('NOT_FOUND');
    expect((err as Error).message).toMatch(/tiny-org\/tiny-pipeline.*text_encoder\/config\.json/);
  });
});
