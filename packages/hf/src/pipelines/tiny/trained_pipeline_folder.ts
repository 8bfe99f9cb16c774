// The folder of a built-in trained pipeline: its components are shipped in diffusers' layout in
// assets/<name> (config.json and safetensors weights each, model_index.json, the scheduler's config)
// without their tokenizers, which are the tiny ones (assets/tiny-tokenizers). The two are put
// together once per content (a hash of the shipped files names the folder) in the temporary folder;
// the pipeline then loads from there through DiffusionPipeline.fromPretrained as any saved pipeline does.
import { createHash } from 'node:crypto';
import { cpSync, existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fillOnce } from './fill_once.js';
import { tinyTokenizerFolder, type TinyTokenizerName } from './tiny_tokenizers.js';

const assets = fileURLToPath(new URL('../../../assets/', import.meta.url));

/** What the asset folder holds beside the components: its model card and its training log. */
const NOT_COMPONENTS = new Set(['README.md', 'train_log.json']);

/**
 * The pipeline folder of built-in trained pipeline `name` (assets/`name`), its tokenizer folders
 * (model_index.json's `tokenizer`, `tokenizer_2`, ...) filled with the tiny tokenizers `tokenizers` names.
 */
export function trainedPipelineFolder(name: string, tokenizers: Readonly<Record<string, TinyTokenizerName>>): string {
  const source = join(assets, name);
  const hash = createHash('sha256');
  for (const file of readdirSync(source, { recursive: true, encoding: 'utf8' }).sort()) {
    const path = join(source, file);
    if (statSync(path).isFile()) hash.update(file).update(readFileSync(path));
  }
  const folder = join(tmpdir(), `dtorch-${name}-${hash.digest('hex').slice(0, 12)}`);
  return fillOnce(folder, (staging) => {
    cpSync(source, staging, { recursive: true, filter: (from) => from === source || !NOT_COMPONENTS.has(from.slice(source.length + 1)) });
    for (const [part, tokenizer] of Object.entries(tokenizers)) {
      if (existsSync(join(staging, part))) continue;
      cpSync(tinyTokenizerFolder(tokenizer), join(staging, part), { recursive: true, filter: (from) => !from.endsWith('.complete') });
    }
  });
}
