// Which files hold a model's weights: a single safetensors file or a sharded checkpoint's
// index, under transformers' name (model.*) or diffusers' (diffusion_pytorch_model.*). Only
// those files (the index, then the shards it names) are fetched.
import { dirname, relative, sep } from 'node:path';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { readSafetensorsIndex, type RepoFiles } from '@dtorch/external';
import { inSubfolder } from './options.js';

const candidates = ['model.safetensors', 'model.safetensors.index.json', 'diffusion_pytorch_model.safetensors', 'diffusion_pytorch_model.safetensors.index.json'];
const pickleNames = ['pytorch_model.bin', 'pytorch_model.bin.index.json', 'diffusion_pytorch_model.bin', 'model.ckpt', 'tf_model.h5', 'flax_model.msgpack'];

/** The local path of the weights under `subfolder` (a .safetensors file or an index whose shards are fetched beside it). */
export async function fetchWeights(repo: RepoFiles, subfolder: string | undefined): Promise<string> {
  const name = candidates.find((c) => repo.has(inSubfolder(subfolder, c)));
  const where = `${repo.description}${subfolder ? ` (subfolder ${subfolder})` : ''}`;
  if (!name) {
    const other = pickleNames.find((c) => repo.has(inSubfolder(subfolder, c)));
    const hint = other
      ? `it has only ${other}; DTorch reads safetensors: convert it once in Python with model.save_pretrained(folder, safe_serialization=True)`
      : `it has none of ${candidates.join(', ')}`;
    throw new DTorchError(ErrorCode.NotFound, `${where} has no safetensors weights: ${hint}`);
  }
  const [path] = await repo.fetch([inSubfolder(subfolder, name)]);
  if (name.endsWith('.index.json')) {
    const folder = inSubfolder(subfolder, '');
    const local = readSafetensorsIndex(path!).files; // absolute paths beside the index
    const shards = local.map((shard) => folder + relative(dirname(path!), shard).split(sep).join('/'));
    await repo.fetch(shards);
  }
  return path!;
}
