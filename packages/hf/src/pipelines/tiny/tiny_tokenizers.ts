// The tokenizers of the built-in tiny pipelines: folders shipped gzipped in assets/tiny-tokenizers
// (assets/tiny-tokenizers/README.md says what they are), unpacked once per version into the
// temporary folder, then loaded by AutoTokenizer as any saved tokenizer folder.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { AutoTokenizer } from '../../tokenizers/auto_tokenizer.js';
import type { PreTrainedTokenizer } from '../../tokenizers/pretrained_tokenizer.js';
import { fillOnce } from './fill_once.js';

/** The built-in tiny tokenizers: CLIP's BPE and a small T5 SentencePiece. */
export type TinyTokenizerName = 'clip' | 't5';

const assets = fileURLToPath(new URL('../../../assets/tiny-tokenizers/', import.meta.url));

/** The unpacked folder of tiny tokenizer `name`. */
export function tinyTokenizerFolder(name: TinyTokenizerName): string {
  const source = join(assets, name);
  const version = JSON.parse(readFileSync(fileURLToPath(new URL('../../../package.json', import.meta.url)), 'utf8')).version as string;
  const folder = join(tmpdir(), `dtorch-tiny-tokenizers-${version}`, name);
  return fillOnce(folder, (staging) => {
    for (const file of readdirSync(source)) {
      const bytes = readFileSync(join(source, file));
      writeFileSync(join(staging, file.replace(/\.gz$/, '')), file.endsWith('.gz') ? gunzipSync(bytes) : bytes);
    }
  });
}

/** Tiny tokenizer `name`, loaded. */
export function tinyTokenizer(name: TinyTokenizerName): Promise<PreTrainedTokenizer> {
  return AutoTokenizer.fromPretrained(tinyTokenizerFolder(name));
}
