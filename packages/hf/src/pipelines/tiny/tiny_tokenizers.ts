// The tokenizers of the built-in tiny pipelines: folders shipped gzipped in assets/tiny-tokenizers
// (assets/tiny-tokenizers/README.md says what they are), unpacked once per version into the
// temporary folder, then loaded by AutoTokenizer as any saved tokenizer folder.
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { AutoTokenizer } from '../../tokenizers/auto_tokenizer.js';
import type { PreTrainedTokenizer } from '../../tokenizers/pretrained_tokenizer.js';

/** The built-in tiny tokenizers: CLIP's BPE and a small T5 SentencePiece. */
export type TinyTokenizerName = 'clip' | 't5';

const assets = fileURLToPath(new URL('../../../assets/tiny-tokenizers/', import.meta.url));

/** The unpacked folder of tiny tokenizer `name`. */
export function tinyTokenizerFolder(name: TinyTokenizerName): string {
  const source = join(assets, name);
  const version = JSON.parse(readFileSync(fileURLToPath(new URL('../../../package.json', import.meta.url)), 'utf8')).version as string;
  const folder = join(tmpdir(), `dtorch-tiny-tokenizers-${version}`, name);
  if (existsSync(join(folder, '.complete'))) return folder;
  // unpacked beside the final folder, then renamed: a concurrent process never sees half a folder
  const staging = `${folder}.${process.pid}.${Date.now()}`;
  mkdirSync(staging, { recursive: true });
  for (const file of readdirSync(source)) {
    const bytes = readFileSync(join(source, file));
    writeFileSync(join(staging, file.replace(/\.gz$/, '')), file.endsWith('.gz') ? gunzipSync(bytes) : bytes);
  }
  writeFileSync(join(staging, '.complete'), '');
  try {
    renameSync(staging, folder);
  } catch {
    // another process got there first: its folder is complete
  }
  return folder;
}

/** Tiny tokenizer `name`, loaded. */
export function tinyTokenizer(name: TinyTokenizerName): Promise<PreTrainedTokenizer> {
  return AutoTokenizer.fromPretrained(tinyTokenizerFolder(name));
}
