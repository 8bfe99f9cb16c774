// SD3Transformer2DModel: the MMDiT denoiser of Stable Diffusion 3 and 3.5, as diffusers'
// (subfolder 'transformer' of a diffusers pipeline; keys as save_pretrained writes them).
// Latents [B, C, H, W] are cut into p x p patches (pos_embed.proj) plus a 2-D sincos position
// embedding cropped from the middle of a pos_embed_max_size grid; the prompt's embeddings go
// through context_embedder; the timestep and the pooled prompt give one conditioning vector
// (time_text_embed) that modulates every block; joint blocks attend over cat(image, text);
// norm_out and proj_out give each patch's prediction, put back together as [B, C, H, W].
// Parallel: 'dp' splits the batch (inputs made with batchPlacements), and so does 'cfg' (a
// pipeline's [negative; positive] guidance batch placed by batchPlacementsOver(mesh, rows,
// ['cfg', 'dp']): the timestep follows the latents' batch split); its plan (sd3_plans.ts) splits
// heads and feed-forward features over 'tp' and the tokens over 'ulysses' and 'ring'.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode, checkOptions, invalidParameter } from '@dtorch/common';
import { SD3Transformer2DConfig } from './sd3_transformer_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { StepCacheModel } from '../../cache/step_cache_model.js';
import type { FromSingleFileOptions } from '../../loading/single_file/from_single_file.js';
import { sd3FromSingleFile } from '../../loading/single_file/sd3_single_file.js';
import type { DiffusersLora } from '../../lora/lora_formats.js';
import type { LoraFile } from '../../lora/lora_state_dict.js';
import { sd3LoraToDiffusers } from '../../lora/sd3_lora_formats.js';
import { checkHeadsDivide, parallelize } from '../../parallel/parallelize.js';
import { CombinedTimestepTextProjEmbeddings } from '../embeddings/combined_timestep_embeddings.js';
import { AdaLNProjections, AdaLayerNormContinuous } from '../normalization/ada_layer_norm.js';
import { JointTransformerBlock } from './joint_transformer_block.js';
import { PatchEmbed } from './patch_embed.js';
import { sd3ParallelPlan } from './sd3_plans.js';

/** The inputs of SD3Transformer2DModel.forward beside the latents (diffusers' forward arguments, camelCase). */
export interface SD3TransformerCallOptions {
  /** The prompt's token embeddings [B, M, joint_attention_dim] (CLIP-L, CLIP-G and T5, joined). */
  encoderHiddenStates: dt.Tensor;
  /** The pooled prompt embeddings [B, pooled_projection_dim]. */
  pooledProjections: dt.Tensor;
  /** The denoising step of each sample: a [B] tensor, one number for every sample, or B numbers. */
  timestep: dt.Tensor | number | readonly number[];
  /** Blocks not run (diffusers' skip_layers, SD3.5's skip-layer guidance). */
  skipLayers?: readonly number[];
  /**
   * A ControlNet's residuals [B, image tokens, dim], added to the image stream after every
   * block but the last (diffusers' block_controlnet_hidden_states): block i takes entry
   * floor(i / (num_layers / entries)).
   */
  blockControlnetHiddenStates?: readonly dt.Tensor[];
}

const what = 'SD3Transformer2DModel';

/**
 * diffusers' SD3Transformer2DModel: the MMDiT denoiser of Stable Diffusion 3 and 3.5, with its
 * checkpoint keys (subfolder "transformer"). Mesh dims 'dp' and 'cfg' split the batch, 'tp' heads
 * and feed-forward features, 'ulysses' and 'ring' the tokens (sd3ParallelPlan).
 */
export class SD3Transformer2DModel extends StepCacheModel {
  /** The config the model was built from. */
  readonly config: SD3Transformer2DConfig;
  /** Latent patches to image tokens, plus the position embedding. */
  pos_embed: PatchEmbed;
  /** The conditioning vector [B, innerDim] from the timestep and the pooled prompt. */
  time_text_embed: CombinedTimestepTextProjEmbeddings;
  /** Text tokens in: joint_attention_dim to caption_projection_dim. */
  context_embedder: nn.Linear;
  /** diffusers' `transformer_blocks`: the num_layers joint blocks, checkpoint keys transformer_blocks.N.*. */
  transformer_blocks: nn.ModuleList<JointTransformerBlock>;
  /** The output norm, modulated by the conditioning vector. */
  norm_out: AdaLayerNormContinuous;
  // every adaLN norm's linear(SiLU(temb)) in one matmul once packed (packProjections)
  readonly #adaLN = new AdaLNProjections(() => [...this.transformer_blocks].flatMap((b) => [b.norm1, b.norm1_context]).concat(this.norm_out));
  /** Image tokens out: innerDim to patch_size² x out_channels. */
  proj_out: nn.Linear;

  constructor(config: SD3Transformer2DConfig, options: ModelOptions = {}) {
    super();
    if (!(config instanceof SD3Transformer2DConfig)) throw invalidParameter(`${what} config`, 'SD3Transformer2DConfig', config);
    this.config = config;
    const o = { mesh: options.mesh ?? dt.defaultMesh(), dtype: options.dtype ?? config.dtype ?? 'float32' };
    checkHeadsDivide(sd3ParallelPlan, o.mesh, what, 'num_attention_heads', config.numAttentionHeads);
    const dim = config.innerDim;
    this.pos_embed = new PatchEmbed(config.sampleSize, config.patchSize, config.inChannels, dim, config.posEmbedMaxSize, o);
    this.time_text_embed = new CombinedTimestepTextProjEmbeddings(dim, config.pooledProjectionDim, o);
    this.context_embedder = new nn.Linear(config.jointAttentionDim, config.captionProjectionDim, o);
    const blocks = Array.from({ length: config.numLayers }, (_, i) =>
      new JointTransformerBlock(dim, {
        heads: config.numAttentionHeads,
        headDim: config.attentionHeadDim,
        qkNorm: config.qkNorm,
        contextPreOnly: i === config.numLayers - 1,
        dualAttention: config.dualAttentionLayers.includes(i),
      }, o),
    );
    this.transformer_blocks = new nn.ModuleList(blocks);
    this.norm_out = new AdaLayerNormContinuous(dim, dim, { ...o, elementwiseAffine: false, eps: 1e-6 });
    this.proj_out = new nn.Linear(dim, config.patchSize * config.patchSize * config.outChannels, o);
    parallelize(this, o.mesh, sd3ParallelPlan);
  }

  /** Reads the model's config.json. */
  static readConfig(path: string): SD3Transformer2DConfig {
    return SD3Transformer2DConfig.fromFile(path);
  }

  /**
   * The model from one checkpoint file in SD3's original layout (sd3_medium.safetensors,
   * sd3.5_large.safetensors: keys under "model.diffusion_model.", which a file holding the text
   * encoders too may have beside them), as diffusers' from_single_file: keys converted as
   * diffusers converts them, read in place (each rank reads only its slice; fused qkv as row
   * slices), the config read from the shapes (`options.config` gives what they do not fix:
   * sample_size, and attention_head_dim when the file has no qk norms and its heads are not 64
   * wide), on `options.mesh` in `options.dtype`, loaded and packed as fromPretrained gives it.
   */
  static fromSingleFile(path: string, options?: FromSingleFileOptions): Promise<SD3Transformer2DModel> {
    return sd3FromSingleFile(this, path, options);
  }

  /** The mesh the weights are on; inputs must be on it. */
  get mesh(): dt.DeviceMesh {
    return this.proj_out.weight.mesh;
  }

  /** @internal SD3 LoRAs in diffusers' or kohya's (sd-scripts') layout. */
  protected override convertLora(file: LoraFile): DiffusersLora {
    return sd3LoraToDiffusers(file.tensors);
  }

  /**
   * The model's prediction for `hiddenStates` (latents [B, in_channels, H, W], H and W multiples
   * of patch_size): [B, out_channels, H, W], as diffusers' forward(...).sample.
   */
  forward(hiddenStates: dt.Tensor, options: SD3TransformerCallOptions): dt.Tensor {
    const { latent, context, pooled, timestep, skip, controls } = this.checkInputs(hiddenStates, options);
    const { patchSize: p, outChannels } = this.config;
    const [batch, , height, width] = latent.shape as [number, number, number, number];
    const hidden = this.pos_embed.forward(latent);
    const temb = this.time_text_embed.forward(timestep, pooled);
    const projections = this.#adaLN.project(temb);
    const text = this.context_embedder.forward(context);
    const cache = this.blockCache;
    if (cache && (skip.size > 0 || controls.length > 0)) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: skipLayers and blockControlnetHiddenStates do not run with a block cache (First-Block Cache, MagCache: their work changes from block to block); disableCache() first`);
    }
    const first = this.transformer_blocks.at(0)!;
    const last = cache
      ? cache.run(hidden, () => {
          const [t, h] = first.call(hidden, text, temb, projections);
          return { hidden: h, rest: () => this.#blocks(h, t, temb, projections, 1, skip, controls) };
        })
      : this.#blocks(hidden, text, temb, projections, 0, skip, controls);
    const out = this.proj_out.forward(this.norm_out.forward(last, temb, projections?.get(this.norm_out)));
    const [h, w] = [height / p, width / p];
    return out.reshape([batch, h, w, p, p, outChannels]).permute([0, 5, 1, 3, 2, 4]).reshape([batch, outChannels, h * p, w * p]);
  }

  protected override checkCacheable(what: string): void {
    if (this.config.numLayers < 2) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: a block cache (First-Block Cache, MagCache) needs a first block and a last one; this model has num_layers ${this.config.numLayers}`);
  }

  // The blocks from `from` on (skipLayers skipped, ControlNet residuals added): the image tokens
  // after the last. Each block's outputs are freed once the next block has them; the inputs are
  // the caller's.
  #blocks(hidden: dt.Tensor, text: dt.Tensor | undefined, temb: dt.Tensor, projections: Map<nn.Module, dt.Tensor> | undefined, from: number, skip: ReadonlySet<number>, controls: readonly dt.Tensor[]): dt.Tensor {
    const made = new Set<dt.Tensor>();
    const replace = (next: dt.Tensor | undefined, old: dt.Tensor | undefined) => {
      if (next !== old && old && made.has(old)) old.dispose();
      if (next) made.add(next);
      return next;
    };
    let [h, t]: [dt.Tensor, dt.Tensor | undefined] = [hidden, text];
    const blocks = [...this.transformer_blocks];
    for (const [i, block] of blocks.entries()) {
      if (i < from) continue;
      if (!skip.has(i)) {
        const [nextText, nextHidden]: [dt.Tensor | undefined, dt.Tensor] = block.call(h, t!, temb, projections); // each block's intermediates freed at its end
        t = replace(nextText, t);
        h = replace(nextHidden, h)!;
      }
      if (controls.length && !block.contextPreOnly) {
        h = replace(h.add(controls[Math.floor(i / (blocks.length / controls.length))]!), h)!;
      }
    }
    return h;
  }

  protected override packOwnProjections(): number {
    return Number(this.#adaLN.pack());
  }

  private checkInputs(hiddenStates: dt.Tensor, options: SD3TransformerCallOptions) {
    const o = checkOptions<SD3TransformerCallOptions>(`${what} options`, options);
    const mesh = this.mesh;
    const c = this.config;
    const latent = onMesh('hiddenStates', hiddenStates, mesh);
    if (latent.ndim !== 4 || latent.shape[1] !== c.inChannels) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: hiddenStates must be latents [batch, ${c.inChannels}, height, width], got ${latent.describe()}`);
    }
    const [batch, , height, width] = latent.shape as [number, number, number, number];
    if (height % c.patchSize !== 0 || width % c.patchSize !== 0) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: the latent's height and width (${height} x ${width}) must be multiples of patch_size ${c.patchSize}`);
    }
    if (height / c.patchSize > c.posEmbedMaxSize || width / c.patchSize > c.posEmbedMaxSize) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: the latent is ${height} x ${width}, but pos_embed_max_size ${c.posEmbedMaxSize} allows at most ${c.posEmbedMaxSize * c.patchSize} a side`);
    }
    if (o.encoderHiddenStates === undefined) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: options.encoderHiddenStates (the prompt embeddings [batch, tokens, ${c.jointAttentionDim}]) is required`);
    const context = onMesh('encoderHiddenStates', o.encoderHiddenStates, mesh);
    if (context.ndim !== 3 || context.shape[0] !== batch || context.shape[2] !== c.jointAttentionDim) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: encoderHiddenStates must be [${batch}, tokens, ${c.jointAttentionDim}] (batch as hiddenStates, joint_attention_dim), got ${context.describe()}`);
    }
    if (o.pooledProjections === undefined) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: options.pooledProjections (the pooled prompt embeddings [batch, ${c.pooledProjectionDim}]) is required`);
    const pooled = onMesh('pooledProjections', o.pooledProjections, mesh);
    if (pooled.ndim !== 2 || pooled.shape[0] !== batch || pooled.shape[1] !== c.pooledProjectionDim) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: pooledProjections must be [${batch}, ${c.pooledProjectionDim}] (batch as hiddenStates, pooled_projection_dim), got ${pooled.describe()}`);
    }
    for (const [name, t] of [['hiddenStates', latent], ['encoderHiddenStates', context], ['pooledProjections', pooled]] as const) {
      if (!['float32', 'float16', 'bfloat16', 'float64'].includes(t.dtype)) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${name} must be floating point, got ${t.describe()}`);
    }
    const skipLayers = o.skipLayers ?? [];
    if (!Array.isArray(skipLayers) || !skipLayers.every((i) => Number.isInteger(i) && i >= 0 && i < c.numLayers)) {
      throw invalidParameter(`${what} skipLayers`, `an array of block indices in [0, ${c.numLayers})`, o.skipLayers);
    }
    const controls = o.blockControlnetHiddenStates ?? [];
    if (!Array.isArray(controls)) throw invalidParameter(`${what} blockControlnetHiddenStates`, 'an array of Tensors', controls);
    const tokens = (height / c.patchSize) * (width / c.patchSize);
    for (const [i, t] of controls.entries()) {
      const r = onMesh(`blockControlnetHiddenStates[${i}]`, t, mesh);
      if (r.ndim !== 3 || r.shape[0] !== batch || r.shape[1] !== tokens || r.shape[2] !== c.innerDim) {
        throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: blockControlnetHiddenStates[${i}] must be [${batch}, ${tokens}, ${c.innerDim}] (batch, image tokens, width), got ${r.describe()}`);
      }
    }
    return { latent, context, pooled, timestep: timestepTensor(o.timestep, batch, latent), skip: new Set(skipLayers), controls: controls as dt.Tensor[] };
  }
}

function onMesh(name: string, value: unknown, mesh: dt.DeviceMesh): dt.Tensor {
  if (!(value instanceof dt.Tensor)) throw invalidParameter(`${what} ${name}`, 'Tensor', value);
  if (!value.mesh.equals(mesh)) throw new DTorchError(ErrorCode.MeshMismatch, `${what}: ${name} is on ${value.mesh} but the model on ${mesh}; create it on the model's mesh`);
  return value;
}

// The timestep as a [batch] tensor, split over the mesh as the latents' batch is.
function timestepTensor(value: unknown, batch: number, latent: dt.Tensor): dt.Tensor {
  const placements = latent.placements.map((p) => (p.isShard(0) ? dt.Shard(0) : dt.Replicate()));
  const options = { mesh: latent.mesh, placements, dtype: 'float32' as const };
  // a number travels as data, not as an op attribute: each denoising step records the same ops
  if (typeof value === 'number' && Number.isFinite(value)) return dt.tensor(new Array<number>(batch).fill(value), options);
  if (Array.isArray(value) && value.length === batch && value.every((v) => typeof v === 'number' && Number.isFinite(v))) return dt.tensor(value as number[], options);
  if (value instanceof dt.Tensor) {
    if (!value.mesh.equals(latent.mesh)) throw new DTorchError(ErrorCode.MeshMismatch, `${what}: timestep is on ${value.mesh} but the model on ${latent.mesh}; create it on the model's mesh`);
    if (value.ndim === 0) return value.unsqueeze(0).expand([batch]);
    if (value.ndim === 1 && value.shape[0] === batch) return value;
    throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: timestep must be [${batch}] (one per sample) or a scalar, got ${value.describe()}`);
  }
  throw invalidParameter(`${what} timestep`, `a [${batch}] Tensor, a finite number or ${batch} finite numbers`, value);
}
