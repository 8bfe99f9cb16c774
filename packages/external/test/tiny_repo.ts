// A tiny model repository for the fake hub: a config, a small safetensors file (stored with LFS),
// a tokenizer, and a nested text_encoder/config.json; branch `main` and tag `v1` at two commits.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeSafetensors } from '../src/safetensors.js';
import { sha1Hex, type FakeFile, type FakeRepo } from './fake_hub.js';

export const REPO_ID = 'tiny-org/tiny-model';
export const MAIN_COMMIT = sha1Hex('commit main');
export const V1_COMMIT = sha1Hex('commit v1');

function safetensorsBytes(): Uint8Array {
  const dir = mkdtempSync(join(tmpdir(), 'dtorch-tiny-'));
  const path = join(dir, 'model.safetensors');
  const weight = new Float32Array(64).map((_, i) => i / 8);
  writeSafetensors(path, { 'linear.weight': { dtype: 'F32', shape: [8, 8], data: new Uint8Array(weight.buffer) } }, { format: 'pt' });
  const bytes = new Uint8Array(readFileSync(path));
  rmSync(dir, { recursive: true, force: true });
  return bytes;
}

const text = (s: string) => new Uint8Array(Buffer.from(s));

export function tinyFiles(): FakeFile[] {
  return [
    { path: 'config.json', content: text('{"model_type":"tiny","hidden_size":8}\n') },
    { path: 'model.safetensors', content: safetensorsBytes(), lfs: true },
    { path: 'tokenizer.json', content: text('{"version":"1.0","model":{"type":"WordLevel","vocab":{"a":0}}}\n') },
    { path: 'text_encoder/config.json', content: text('{"model_type":"tiny_text","hidden_size":4}\n') },
  ];
}

export function tinyRepo(): FakeRepo {
  const files = tinyFiles();
  const v1Files = files.map((f) => (f.path === 'config.json' ? { ...f, content: text('{"model_type":"tiny","hidden_size":4}\n') } : f));
  return {
    id: REPO_ID,
    revisions: {
      main: { commit: MAIN_COMMIT, files },
      v1: { commit: V1_COMMIT, files: v1Files },
    },
  };
}
