// `--offload model|group[:N]` of `dtorch generate`: 'model' keeps each model in host memory and on
// the devices only while it runs (DiffusionPipeline.enableModelCpuOffload); 'group' keeps the
// transformer's and text encoders' blocks there, N to a group (default 1), each group on the
// devices only while it runs (enableGroupOffload). Parsed when commander reads the flag (one line
// and exit code 1 for a bad one), so that nothing loads first.
import { InvalidArgumentError } from 'commander';

/** The --offload flag, parsed. */
export type OffloadSpec = { readonly kind: 'model' } | { readonly kind: 'group'; readonly numBlocksPerGroup: number };

/** Commander's parser of --offload. */
export function parseOffload(text: string): OffloadSpec {
  if (text === 'model') return { kind: 'model' };
  const group = /^group(?::(\d+))?$/.exec(text);
  const blocks = group?.[1] === undefined ? 1 : Number(group[1]);
  if (!group || !Number.isSafeInteger(blocks) || blocks < 1) {
    throw new InvalidArgumentError(`Expected model, group or group:N (N blocks to a group, a positive integer) for --offload, but received ${JSON.stringify(text)}.`);
  }
  return { kind: 'group', numBlocksPerGroup: blocks };
}
