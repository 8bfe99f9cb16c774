// Group offloading, as diffusers' apply_group_offloading(module, offload_type="block_level",
// num_blocks_per_group=N, use_stream=True): a model's repeated blocks (each outermost ModuleList:
// Flux's transformer_blocks and single_transformer_blocks, T5's block, CLIP's layers) live in
// host memory (HostCopy), N consecutive blocks to a group. A group comes onto its devices when
// one of its blocks runs and leaves once its last block has run; the rest of the model (embedders,
// final norms) stays on its devices. With prefetch (diffusers' use_stream), the next group's
// copies are recorded as soon as a group's last block is: the engine's workers, which run behind
// the recording, stage them in (pinned) host memory while the group's kernels run on the device,
// so two groups are on the devices at the turn. (The engine has no copy stream: on a GPU the copy
// itself queues on the device's stream, after the group's kernels.) Any mesh: every rank moves
// its own pieces.
import { DTorchError, ErrorCode, checkInteger, checkKnownOptions, invalidParameter } from '@dtorch/common';
import * as nn from '@dtorch/nn';
import { hasPackedProjections, inPackedGroup } from '../models/attention/packed_projections.js';
import { PreTrainedModel } from '../loading/pretrained_model.js';
import { HostCopy } from './host_copy.js';
import { offloadKindOf, setOffloadKind } from './offload_kind.js';

/** Options of {@link applyGroupOffloading}, as diffusers' apply_group_offloading's. */
export interface GroupOffloadingOptions {
  /** Consecutive blocks that move together (diffusers' num_blocks_per_group; default 1). */
  numBlocksPerGroup?: number;
  /**
   * Records the next group's copies as soon as the group before it has been recorded, so that the
   * workers stage them while that group runs (diffusers' use_stream; default true). Two groups
   * are then on the devices at the turn; without it, one.
   */
  useStream?: boolean;
}

/** What {@link applyGroupOffloading} did to a model: its groups, and remove() to undo it. */
export interface GroupOffloading {
  /** The groups, each its blocks' paths in the model ('transformer_blocks.0'), in order. */
  readonly groups: readonly (readonly string[])[];
  /** Whether each group's tensors are on their devices now. */
  readonly onDevice: readonly boolean[];
  /** Bytes kept in host memory. */
  readonly hostBytes: number;
  /** Takes the hooks off and puts every block back on its devices for good. */
  remove(): void;
}

// models with group offloading applied
const applied = new WeakMap<nn.Module, GroupOffloading>();

/** The group offloading applied to `module`, if any. */
export function groupOffloadingOf(module: nn.Module): GroupOffloading | undefined {
  return applied.get(module);
}

// one group of blocks and what moves it
interface Group {
  readonly list: string;
  readonly paths: string[];
  readonly blocks: nn.Module[];
  readonly copy: HostCopy;
  next: Group | undefined;
}

/**
 * Keeps the repeated blocks of `module` in host memory, `numBlocksPerGroup` consecutive blocks
 * to a group, each group on its devices only while its blocks run (see the file's comment and
 * {@link GroupOffloadingOptions}). The blocks are read into host memory first, then dropped from
 * the devices; resolves once they are. Outputs are those of the model without it, bit for bit.
 */
export async function applyGroupOffloading(module: nn.Module, options?: GroupOffloadingOptions): Promise<GroupOffloading> {
  const what = 'applyGroupOffloading';
  if (!(module instanceof nn.Module)) throw invalidParameter(`${what} module`, 'nn.Module', module);
  const o = checkKnownOptions<GroupOffloadingOptions>(`${what} options`, options, ['numBlocksPerGroup', 'useStream']);
  const perGroup = o.numBlocksPerGroup === undefined ? 1 : checkInteger(`${what} numBlocksPerGroup`, o.numBlocksPerGroup, 1);
  if (o.useStream !== undefined && typeof o.useStream !== 'boolean') throw invalidParameter(`${what} useStream`, 'true or false', o.useStream);
  const kind = offloadKindOf(module);
  if (kind === 'group') throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${module.constructor.name} has group offloading already; remove() it first`);
  if (kind) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${module.constructor.name} is under ${kind} offloading; disable it first (one kind at a time)`);
  const lists = blockLists(module);
  if (lists.length === 0) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${module.constructor.name} has no repeated blocks (no ModuleList of modules) to offload`);

  const groups: Group[] = [];
  for (const [path, list] of lists) {
    const blocks = [...list];
    let previous: Group | undefined;
    for (let i = 0; i < blocks.length; i += perGroup) {
      const members = blocks.slice(i, i + perGroup);
      const group: Group = { list: path, paths: members.map((_, j) => `${path}.${i + j}`), blocks: members, copy: new HostCopy(members), next: undefined };
      if (previous) previous.next = group;
      groups.push((previous = group));
    }
  }
  setOffloadKind(module, 'group'); // from now: a second call while the blocks are read is refused
  try {
    await Promise.all(groups.map((g) => g.copy.offloadAll()));
  } catch (err) {
    for (const g of groups) onloadGroup(g); // a group that went off comes back: a call that throws changes nothing
    setOffloadKind(module, undefined);
    throw err;
  }

  const prefetch = o.useStream ?? true;
  const hooks: nn.RemovableHandle[] = [];
  for (const group of groups) {
    // a block of the group runs: the group on (and any other of its list off: a group whose last block was skipped)
    const onload = () => {
      if (group.copy.onDevice) return;
      for (const other of groups) if (other !== group && other.list === group.list) other.copy.offload();
      onloadGroup(group);
    };
    for (const block of group.blocks) hooks.push(block.registerForwardPreHook(onload));
    // its last block has run: the next group on, this one off
    hooks.push(group.blocks.at(-1)!.registerForwardHook(() => {
      if (prefetch && group.next) onloadGroup(group.next);
      group.copy.offload();
    }));
  }
  // the model's forward begins: the first group on (T5 reads its first block's position bias before the blocks run)
  hooks.push(module.registerForwardPreHook(() => {
    if (!groups[0]!.copy.onDevice) onloadGroup(groups[0]!);
  }));
  // the model's forward has ended: no block stays on (a step cache may have skipped the last ones)
  hooks.push(module.registerForwardHook(() => {
    for (const g of groups) g.copy.offload();
  }));

  const handle: GroupOffloading = {
    groups: groups.map((g) => g.paths),
    get onDevice() {
      return groups.map((g) => g.copy.onDevice);
    },
    get hostBytes() {
      return groups.reduce((n, g) => n + g.copy.hostBytes, 0);
    },
    remove() {
      if (applied.get(module) !== handle) return;
      for (const h of hooks.splice(0)) h.remove();
      for (const g of groups) {
        onloadGroup(g);
        g.copy.clear();
      }
      // projections packed across blocks (SD3's adaLN linears) ran one by one while the groups moved
      if (hasPackedProjections(module)) module.packProjections();
      applied.delete(module);
      setOffloadKind(module, undefined);
    },
  };
  applied.set(module, handle);
  return handle;
}

// The group's blocks on their devices, their projections packed and their LoRA linears laid as loading left them (the same matmuls).
function onloadGroup(group: Group): void {
  if (group.copy.onload() === 0) return;
  for (const block of group.blocks) {
    for (const [, m] of block.namedModules()) if (!(m instanceof PreTrainedModel) && hasPackedProjections(m)) m.packProjections();
    // then linears with running LoRA adapters laid beside them, as PreTrainedModel.packProjections lays them
    for (const [, m] of block.namedModules()) if (m instanceof nn.Linear) nn.linearLora(m)?.layout(!inPackedGroup(m));
  }
  group.copy.sameValues(); // packing and laying moved the values onload made, they changed none
}

// The outermost ModuleLists of modules, by path (lists inside a listed block are the block's).
function blockLists(module: nn.Module): [string, nn.ModuleList][] {
  const lists: [string, nn.ModuleList][] = [];
  for (const [path, m] of module.namedModules()) {
    if (!(m instanceof nn.ModuleList) || m.length === 0) continue;
    if (lists.some(([p]) => path.startsWith(`${p}.`))) continue;
    lists.push([path, m]);
  }
  return lists;
}
