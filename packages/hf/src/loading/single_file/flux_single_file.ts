// FLUX.1 transformers in BFL's layout (flux1-dev.safetensors, flux1-schnell.safetensors, and
// ComfyUI's copies under "model.diffusion_model.") to diffusers' FluxTransformer2DModel, as
// diffusers' convert_flux_transformer_checkpoint_to_diffusers: keys renamed by flux_bfl_layout.ts,
// fused qkv and single blocks' linear1 (q, k, v, MLP) split by rows, the final adaLN's (shift,
// scale) halves swapped. The config comes from the shapes (diffusers fetches FLUX.1's from the
// hub instead); unlike diffusers' conversion, which hard-codes FLUX.1's width (3072), any width.
import { DTorchError, ErrorCode } from '@dtorch/common';
import { ConfigReader, type JsonObject } from '../../configs/config_file.js';
import { FluxTransformer2DConfig } from '../../models/flux/flux_transformer_config.js';
import { fluxBflDoubleBlock, fluxBflSingleBlock, fluxBflTop, type BflModules } from '../../models/flux/flux_bfl_layout.js';
import type { FluxTransformer2DModel } from '../../models/flux/flux_transformer_2d_model.js';
import { PlanBuilder, type ConversionPlan } from './conversion_plan.js';
import { checkAgrees, fromSingleFile, singleFileConfig, type FromSingleFileOptions, type SingleFileLayout, type SingleFileModelClass } from './from_single_file.js';
import type { SingleFileCheckpoint } from './single_file_checkpoint.js';

/** FLUX.1's rotary dims per position axis (BFL's axes_dim), for its heads of 128. */
const flux1AxesDims = [16, 56, 56];

/** BFL's FLUX.1 layout, read into FluxTransformer2DModel. */
export const fluxSingleFileLayout: SingleFileLayout<FluxTransformer2DConfig> = {
  name: "a FLUX.1 transformer in BFL's layout (flux1-dev.safetensors: double_blocks.N.*, single_blocks.N.*)",
  signature: 'double_blocks.0.img_attn.norm.key_norm.scale',
  config: fluxConfig,
  plan: fluxPlan,
};

/** FluxTransformer2DModel.fromSingleFile: `path` in BFL's layout. */
export function fluxFromSingleFile<M extends FluxTransformer2DModel>(cls: SingleFileModelClass<M, FluxTransformer2DConfig>, path: string, options?: FromSingleFileOptions): Promise<M> {
  return fromSingleFile(cls, fluxSingleFileLayout, path, options);
}

/**
 * The FluxTransformer2DConfig that FluxTransformer2DModel.fromSingleFile builds for the BFL-layout
 * file `path` (its shapes, then `config`'s keys over them), without loading any weights.
 */
export function fluxSingleFileConfig(path: string, config: JsonObject = {}): FluxTransformer2DConfig {
  return singleFileConfig(fluxSingleFileLayout, 'fluxSingleFileConfig', path, config);
}

// The config from the shapes: block counts, widths and heads (the qk norm's size is a head's
// width), in_channels, joint_attention_dim, pooled_projection_dim, out_channels, guidance_embeds
// (guidance_in present); axes_dims_rope is not in the weights: FLUX.1's for heads of 128, else
// options.config must give it.
function fluxConfig(file: SingleFileCheckpoint, given: JsonObject, what: string): FluxTransformer2DConfig {
  const [inner, inChannels] = file.shape('img_in.weight') as [number, number];
  const headDim = file.shape('double_blocks.0.img_attn.norm.query_norm.scale')[0]!;
  const patchSize = typeof given['patch_size'] === 'number' ? given['patch_size'] : 1;
  const outRows = file.shape('final_layer.linear.weight')[0]!;
  const measured = {
    num_layers: file.blockCount('double_blocks'),
    num_single_layers: file.blockCount('single_blocks'),
    in_channels: inChannels,
    out_channels: outRows / (patchSize * patchSize),
    attention_head_dim: headDim,
    num_attention_heads: inner / headDim,
    joint_attention_dim: file.shape('txt_in.weight')[1]!,
    pooled_projection_dim: file.shape('vector_in.in_layer.weight')[1]!,
    guidance_embeds: file.has('guidance_in.in_layer.weight'),
  };
  if (!Number.isInteger(measured.num_attention_heads)) {
    throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: ${file.path}: img_in.weight is ${inner} wide, not a whole number of heads of ${headDim} (the size of query_norm.scale); the file is damaged`);
  }
  const headDimGiven = typeof given['attention_head_dim'] === 'number' ? given['attention_head_dim'] : headDim;
  if (given['axes_dims_rope'] === undefined && headDimGiven !== 128) {
    throw new DTorchError(
      ErrorCode.BadConfig,
      `${what}: the rotary dims per position axis (axes_dims_rope) are not in the weights of ${file.path}, and FLUX.1's ${JSON.stringify(flux1AxesDims)} are for heads of 128, not ${headDimGiven}: pass options.config { axes_dims_rope } (even dims adding up to ${headDimGiven})`,
    );
  }
  const json: JsonObject = { _class_name: 'FluxTransformer2DModel', patch_size: 1, axes_dims_rope: flux1AxesDims, ...measured, ...given };
  const config = new FluxTransformer2DConfig(new ConfigReader(`${what}: the config of ${file.path}`, json));
  checkAgrees(file, what, [
    ['num_layers', config.numLayers, measured.num_layers, 'double blocks, double_blocks.N'],
    ['num_single_layers', config.numSingleLayers, measured.num_single_layers, 'single blocks, single_blocks.N'],
    ['in_channels', config.inChannels, inChannels, 'img_in.weight'],
    ['out_channels', config.outChannels * config.patchSize ** 2, outRows, 'rows of final_layer.linear.weight, patch_size² x out_channels'],
    ['attention_head_dim', config.attentionHeadDim, headDim, 'the size of the qk norms, query_norm.scale'],
    ['num_attention_heads', config.numAttentionHeads, measured.num_attention_heads, 'the width of img_in.weight over attention_head_dim'],
    ['joint_attention_dim', config.jointAttentionDim, measured.joint_attention_dim, 'txt_in.weight'],
    ['pooled_projection_dim', config.pooledProjectionDim, measured.pooled_projection_dim, 'vector_in.in_layer.weight'],
    ['guidance_embeds', config.guidanceEmbeds, measured.guidance_embeds, 'guidance_in.* present or not'],
  ]);
  return config;
}

// Where each diffusers key lies in the BFL file, for a model of `config`.
function fluxPlan(file: SingleFileCheckpoint, config: FluxTransformer2DConfig): ConversionPlan {
  const p = new PlanBuilder((key) => file.shape(key));
  const top = Object.entries(fluxBflTop).filter(([name]) => config.guidanceEmbeds || !name.startsWith('guidance_in.'));
  planModules(p, Object.fromEntries(top), '', '', config.innerDim);
  for (let i = 0; i < config.numLayers; i++) planModules(p, fluxBflDoubleBlock, `transformer_blocks.${i}.`, `double_blocks.${i}.`, config.innerDim);
  for (let i = 0; i < config.numSingleLayers; i++) planModules(p, fluxBflSingleBlock, `single_transformer_blocks.${i}.`, `single_blocks.${i}.`, config.innerDim);
  return p.plan;
}

/** A layout table's modules, diffusers' under `to` and BFL's under `from`; fused parts scaled by the model's width `dim`. */
function planModules(p: PlanBuilder, table: BflModules, to: string, from: string, dim: number): void {
  for (const [name, m] of Object.entries(table)) {
    const modules = m.modules.map((module) => to + module);
    if (m.kind === 'norm') p.tensor(`${modules[0]}.weight`, `${from}${name}.scale`);
    else if (m.parts) p.split(modules, from + name, m.parts.map((part) => part * dim), partsText(m.parts, dim));
    else if (m.shiftScale) p.swapHalves(modules[0]!, from + name);
    else p.linear(modules[0]!, from + name);
  }
}

/** What a fused matrix's parts are, for the error when its rows do not add up: q, k, v, then the single blocks' MLP. */
function partsText(parts: readonly number[], dim: number): string {
  const mlp = parts[3];
  return mlp === undefined ? 'q, k, v' : `q, k, v and the MLP's ${mlp} x ${dim}`;
}
