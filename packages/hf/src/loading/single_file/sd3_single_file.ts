// SD3 and SD3.5 transformers in the original MMDiT layout (sd3_medium.safetensors,
// sd3.5_large.safetensors: "model.diffusion_model.joint_blocks.N.x_block.attn.qkv.weight", ...)
// to diffusers' SD3Transformer2DModel, as diffusers' convert_sd3_transformer_checkpoint_to_diffusers:
// keys renamed by the tables of models/sd3/sd3_mmdit_layout.ts, each joint block's fused qkv
// (and SD3.5's attn2) split by rows, the (shift, scale) halves of the last block's context adaLN
// and of the final adaLN swapped.
// The config comes from the shapes; the head width, which only SD3.5's qk norms show, is the
// MMDiT's 64 otherwise (as every released SD3 has), and sample_size diffusers' 128.
import { DTorchError, ErrorCode } from '@dtorch/common';
import { ConfigReader, type JsonObject } from '../../configs/config_file.js';
import { SD3Transformer2DConfig } from '../../models/sd3/sd3_transformer_config.js';
import {
  sd3MmditBlock,
  sd3MmditContext,
  sd3MmditDual,
  sd3MmditDualQkNorms,
  sd3MmditDualQkv,
  sd3MmditFinalNorm,
  sd3MmditLastContextNorm,
  sd3MmditQkNorms,
  sd3MmditQkv,
  sd3MmditTop,
} from '../../models/sd3/sd3_mmdit_layout.js';
import type { SD3Transformer2DModel } from '../../models/sd3/sd3_transformer_2d_model.js';
import { PlanBuilder, type ConversionPlan } from './conversion_plan.js';
import { checkAgrees, fromSingleFile, singleFileConfig, type FromSingleFileOptions, type SingleFileLayout, type SingleFileModelClass } from './from_single_file.js';
import type { SingleFileCheckpoint } from './single_file_checkpoint.js';

/** The original MMDiT's head width (hidden size 64 x depth in depth heads), for files without qk norms to show it. */
const mmditHeadDim = 64;

/** SD3's original MMDiT layout, read into SD3Transformer2DModel. */
export const sd3SingleFileLayout: SingleFileLayout<SD3Transformer2DConfig> = {
  name: 'an SD3 transformer in its original layout (sd3_medium.safetensors: joint_blocks.N.x_block.*, joint_blocks.N.context_block.*)',
  signature: 'joint_blocks.0.context_block.adaLN_modulation.1.bias',
  config: sd3Config,
  plan: sd3Plan,
};

/** SD3Transformer2DModel.fromSingleFile: `path` in the original MMDiT layout. */
export function sd3FromSingleFile<M extends SD3Transformer2DModel>(cls: SingleFileModelClass<M, SD3Transformer2DConfig>, path: string, options?: FromSingleFileOptions): Promise<M> {
  return fromSingleFile(cls, sd3SingleFileLayout, path, options);
}

/**
 * The SD3Transformer2DConfig that SD3Transformer2DModel.fromSingleFile builds for the file `path`
 * in SD3's original layout (its shapes, then `config`'s keys over them), without loading any weights.
 */
export function sd3SingleFileConfig(path: string, config: JsonObject = {}): SD3Transformer2DConfig {
  return singleFileConfig(sd3SingleFileLayout, 'sd3SingleFileConfig', path, config);
}

// The config from the shapes: depth (joint blocks), patch size, in_channels and width
// (x_embedder.proj), pos_embed_max_size (pos_embed's grid), joint_attention_dim and
// caption_projection_dim (context_embedder), pooled_projection_dim (y_embedder), out_channels
// (final_layer), dual_attention_layers (blocks with attn2), qk_norm (ln_q present) and with it
// the head width; sample_size and, without qk norms, the head width are not in the weights.
function sd3Config(file: SingleFileCheckpoint, given: JsonObject, what: string): SD3Transformer2DConfig {
  const [inner, inChannels, patch] = file.shape('x_embedder.proj.weight') as [number, number, number, number];
  const grid = Math.round(Math.sqrt(file.shape('pos_embed')[1] ?? 0));
  const [caption, joint] = file.shape('context_embedder.weight') as [number, number];
  const outRows = file.shape('final_layer.linear.weight')[0]!;
  const numLayers = file.blockCount('joint_blocks');
  const qkNorm = file.has('joint_blocks.0.x_block.attn.ln_q.weight') ? 'rms_norm' : null;
  const measuredHeadDim = qkNorm ? file.shape('joint_blocks.0.x_block.attn.ln_q.weight')[0]! : undefined;
  const measured = {
    num_layers: numLayers,
    patch_size: patch,
    in_channels: inChannels,
    out_channels: outRows / (patch * patch),
    pos_embed_max_size: grid,
    joint_attention_dim: joint,
    caption_projection_dim: caption,
    pooled_projection_dim: file.shape('y_embedder.mlp.0.weight')[1]!,
    dual_attention_layers: file.blockIndices('joint_blocks').filter((i) => file.has(`joint_blocks.${i}.x_block.attn2.qkv.weight`)),
    qk_norm: qkNorm,
  };
  const givenHeadDim = typeof given['attention_head_dim'] === 'number' ? given['attention_head_dim'] : undefined;
  const headDim = measuredHeadDim ?? givenHeadDim ?? mmditHeadDim;
  if (inner % headDim !== 0) {
    throw new DTorchError(
      ErrorCode.BadConfig,
      `${what}: ${file.path} is ${inner} wide (x_embedder.proj.weight), not a multiple of the MMDiT's heads of ${headDim}, and its weights do not show the head width (no qk norms): pass options.config { attention_head_dim } (and num_attention_heads)`,
    );
  }
  const json: JsonObject = { _class_name: 'SD3Transformer2DModel', sample_size: 128, attention_head_dim: headDim, num_attention_heads: inner / headDim, ...measured, ...given };
  const config = new SD3Transformer2DConfig(new ConfigReader(`${what}: the config of ${file.path}`, json));
  checkAgrees(file, what, [
    ['num_layers', config.numLayers, numLayers, 'joint blocks, joint_blocks.N'],
    ['patch_size', config.patchSize, patch, 'x_embedder.proj.weight'],
    ['in_channels', config.inChannels, inChannels, 'x_embedder.proj.weight'],
    ['num_attention_heads x attention_head_dim', config.innerDim, inner, 'the width of x_embedder.proj.weight'],
    ...(measuredHeadDim ? [['attention_head_dim', config.attentionHeadDim, measuredHeadDim, 'the size of the qk norms, ln_q.weight'] as const] : []),
    ['out_channels', config.outChannels * config.patchSize ** 2, outRows, 'rows of final_layer.linear.weight, patch_size² x out_channels'],
    ['pos_embed_max_size', config.posEmbedMaxSize ** 2, file.shape('pos_embed')[1], 'the positions of pos_embed, pos_embed_max_size²'],
    ['joint_attention_dim', config.jointAttentionDim, joint, 'context_embedder.weight'],
    ['caption_projection_dim', config.captionProjectionDim, caption, 'context_embedder.weight'],
    ['pooled_projection_dim', config.pooledProjectionDim, measured.pooled_projection_dim, 'y_embedder.mlp.0.weight'],
    ['dual_attention_layers', [...config.dualAttentionLayers].sort((a, b) => a - b), measured.dual_attention_layers, 'joint blocks with x_block.attn2'],
    ['qk_norm', config.qkNorm !== null, qkNorm !== null, 'ln_q / ln_k present or not'],
  ]);
  return config;
}

// Where each diffusers key lies in the original file, for a model of `config` (the names: sd3_mmdit_layout.ts).
function sd3Plan(file: SingleFileCheckpoint, config: SD3Transformer2DConfig): ConversionPlan {
  const p = new PlanBuilder((key) => file.shape(key));
  const dim = config.innerDim;
  const qkv = (to: string, from: string, table: Readonly<Record<string, readonly string[]>>) => {
    for (const [f, modules] of Object.entries(table)) p.split(modules.map((m) => to + m), from + f, [dim, dim, dim], 'q, k, v');
  };
  p.tensor('pos_embed.pos_embed', 'pos_embed');
  for (const [to, from] of Object.entries(sd3MmditTop)) p.linear(to, from);
  for (let i = 0; i < config.numLayers; i++) {
    const [to, from] = [`transformer_blocks.${i}.`, `joint_blocks.${i}.`];
    const last = i === config.numLayers - 1;
    qkv(to, from, sd3MmditQkv);
    for (const [t, f] of Object.entries(sd3MmditBlock)) p.linear(to + t, from + f);
    if (config.qkNorm) for (const [t, f] of Object.entries(sd3MmditQkNorms)) p.tensor(to + t, from + f);
    if (!last) for (const [t, f] of Object.entries(sd3MmditContext)) p.linear(to + t, from + f);
    // the last block's text stream only feeds the image's attention: its adaLN is diffusers' AdaLayerNormContinuous
    else p.swapHalves(to + sd3MmditLastContextNorm.module, from + sd3MmditLastContextNorm.original);
    if (config.dualAttentionLayers.includes(i)) {
      qkv(to, from, sd3MmditDualQkv);
      for (const [t, f] of Object.entries(sd3MmditDual)) p.linear(to + t, from + f);
      if (config.qkNorm) for (const [t, f] of Object.entries(sd3MmditDualQkNorms)) p.tensor(to + t, from + f);
    }
  }
  p.swapHalves(sd3MmditFinalNorm.module, sd3MmditFinalNorm.original);
  return p.plan;
}
