// SD3 / SD3.5 LoRAs in kohya's (sd-scripts') layout rewritten into diffusers' module paths:
// "lora_unet_" + the original MMDiT's module with "." -> "_" ("lora_unet_joint_blocks_0_x_block_attn_qkv"),
// "lora_te1_" / "lora_te2_" + the CLIP's (CLIP-L, CLIP-G), each with ".lora_down.weight" (A),
// ".lora_up.weight" (B) and ".alpha", as sd-scripts' networks/lora_sd3.py saves them. diffusers reads
// no such file (SD3LoraLoaderMixin passes the keys through, then finds no "transformer." key and
// loads nothing); the MMDiT names go where diffusers' single-file converter puts their weights
// (models/sd3/sd3_mmdit_layout.ts): a fused qkv is split by rows of B, each part keeping A whole, or,
// for sd-scripts' split_qkv files (A's stacked, B block-diagonal), each part its own rows of A; the
// (shift, scale) halves of the final adaLN and of the last block's context adaLN are swapped. As
// fluxLoraToDiffusers: alpha per module, never folded into the weights; unknown keys listed.
import { DTorchError, ErrorCode } from '@dtorch/common';
import {
  sd3MmditBlock,
  sd3MmditContext,
  sd3MmditDual,
  sd3MmditDualQkv,
  sd3MmditFinalNorm,
  sd3MmditLastContextNorm,
  sd3MmditQkv,
  sd3MmditTop,
} from '../models/sd3/sd3_mmdit_layout.js';
import { add, addTarget, clipModule, detectLoraLayout, fromDiffusersLayout, groupBy, kohyaSuffixes, pair, scalar, weightsOf, withoutDora, type DiffusersLora, type LoraTarget } from './lora_formats.js';
import type { LoraTensor } from './lora_state_dict.js';

// sd-scripts' names (after "lora_unet_", and after "joint_blocks_N_" in a block) -> where their rows go
const underscored = (name: string) => name.replaceAll('.', '_');
const linearsOf = (tables: readonly Readonly<Record<string, string>>[]) => tables.flatMap((t) => Object.entries(t)).map(([module, original]) => [underscored(original), { modules: [module] }] as const);
const qkvsOf = (tables: readonly Readonly<Record<string, readonly string[]>>[]) =>
  tables.flatMap((t) => Object.entries(t)).map(([original, modules]) => [underscored(original), { modules, parts: modules.map(() => 1) }] as const);

// the patch embedding (x_embedder.proj) is a convolution: its LoRA is no linear's, so unknown
const topTargets = new Map<string, LoraTarget>([
  ...linearsOf([sd3MmditTop]).filter(([name]) => name !== underscored(sd3MmditTop['pos_embed.proj']!)),
  [underscored(sd3MmditFinalNorm.original), { modules: [sd3MmditFinalNorm.module], shiftScale: true }],
]);
const blockTargets = new Map<string, LoraTarget>([...linearsOf([sd3MmditBlock, sd3MmditContext, sd3MmditDual]), ...qkvsOf([sd3MmditQkv, sd3MmditDualQkv])]);
const contextNorm = underscored(sd3MmditLastContextNorm.original);

/** The target of an sd-scripts unet name (without "lora_unet_"), with block paths filled in. */
function unetTarget(name: string): LoraTarget | undefined {
  const block = /^joint_blocks_(\d+)_(.+)$/.exec(name);
  if (!block) return topTargets.get(name);
  const [, index, rest] = block;
  const target = blockTargets.get(rest!);
  return target && { ...target, modules: target.modules.map((m) => `transformer_blocks.${index}.${m}`) };
}

const clipComponents: Readonly<Record<string, string>> = { '1': 'text_encoder', '2': 'text_encoder_2' };

/** sd-scripts' SD3 layout; T5's "lora_te3_" (which diffusers' loaders leave to PEFT) is listed unknown. */
function fromKohya(tensors: ReadonlyMap<string, LoraTensor>, out: DiffusersLora): void {
  const rest: string[] = [];
  const groups = groupBy(tensors.keys(), kohyaSuffixes, rest);
  out.unknown.push(...rest);
  for (const [name, group] of groups) {
    let target = name.startsWith('lora_unet_') ? unetTarget(name.slice('lora_unet_'.length)) : undefined;
    const te = /^lora_te([12])_(.+)$/.exec(name);
    const clip = te ? clipModule(te[2]!) : undefined;
    if (!target && !clip) {
      out.unknown.push(...Object.values(group));
      continue;
    }
    const weights = weightsOf(group, out, (k) => k);
    if (!weights) continue;
    const [a, b] = pair(tensors, ...weights);
    // no alpha: sd-scripts' default, alpha = rank (scale 1)
    const alpha = group.alpha ? scalar(tensors.get(group.alpha)!, group.alpha) : a.shape[0]!;
    if (!target) {
      add(out, `${clipComponents[te![1]!]}.${clip}`, { a, b, alpha }, weights[1]);
      continue;
    }
    // the last block's context adaLN emits (shift, scale), 2 x its input; the others' six parts
    if (name.endsWith(`_${contextNorm}`) && b.shape[0] === 2 * a.shape[1]!) target = { ...target, shiftScale: true };
    addTarget(out, target, a, b, alpha, weights[1]);
  }
}

/**
 * An SD3 / SD3.5 LoRA file's tensors in diffusers' module paths (SD3Transformer2DModel's
 * transformer_blocks.0.attn.to_q, ..., and the CLIPs' text_encoder / text_encoder_2 modules):
 * kohya / sd-scripts' layout converted, diffusers' own read as fluxLoraToDiffusers reads it. Pure:
 * no device, bytes are moved or viewed, never converted. Bad input (a down without its up, ranks
 * that disagree, a tensor that is not a matrix, a Flux layout) is a BAD_FILE DTorchError naming the key.
 */
export function sd3LoraToDiffusers(tensors: ReadonlyMap<string, LoraTensor>): DiffusersLora {
  const out: DiffusersLora = { layout: 'diffusers', modules: new Map(), unknown: [] };
  const kept = withoutDora(tensors, out);
  // kohya's by a lora_down or a lora_up (diffusers' Flux detection looks at lora_down alone)
  out.layout = [...kept.keys()].some((k) => /\.lora_(down|up)\.weight$/.test(k)) ? 'kohya' : detectLoraLayout(kept.keys());
  if (out.layout === 'kohya') fromKohya(kept, out);
  else if (out.layout === 'diffusers') fromDiffusersLayout(kept, out, true);
  else {
    const key = [...kept.keys()].find((k) => detectLoraLayout([k]) === out.layout);
    throw new DTorchError(
      ErrorCode.BadFile,
      `LoRA tensor "${key}": has ${out.layout === 'bfl' ? "BFL's / ComfyUI's names with lora_A / lora_B" : "XLabs' processor names"}, a layout DTorch reads for Flux only; SD3 LoRAs are read in diffusers' layout ("transformer.<module>.lora_A.weight") and kohya's ("lora_unet_joint_blocks_0_x_block_attn_qkv.lora_down.weight")`,
    );
  }
  return out;
}
