// FluxTransformer2DModel: the denoiser of FLUX.1 (dev and schnell) as diffusers'
// transformer_flux.py: image tokens (x_embedder) and text tokens (context_embedder), a
// conditioning vector from the timestep, the pooled text and (dev) the guidance scale, double-
// stream blocks, then single-stream blocks over the joint sequence (text first), an adaptive
// output norm and proj_out over the image tokens. Rotary tables from the position ids of text
// then image tokens (pos_embed). Keys as diffusers' checkpoints (subfolder "transformer").
// Its parallel plan (flux_plans.ts): tokens over 'ulysses' / 'ring', heads and MLP features over
// 'tp', the batch over 'dp' (and 'cfg').
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { DTorchError, ErrorCode, checkOptions, invalidParameter, log } from '@dtorch/common';
import { FluxTransformer2DConfig } from './flux_transformer_config.js';
import type { ModelOptions } from '../../loading/pretrained_model.js';
import { StepCacheModel } from '../../cache/step_cache_model.js';
import type { FromSingleFileOptions } from '../../loading/single_file/from_single_file.js';
import { fluxFromSingleFile } from '../../loading/single_file/flux_single_file.js';
import { fluxLoraToDiffusers, type DiffusersLora } from '../../lora/lora_formats.js';
import type { LoraFile } from '../../lora/lora_state_dict.js';
import { pieceByPieceJoin, type HasJointAttention, type JointAttention } from '../../parallel/joint_attention.js';
import { checkHeadsDivide, parallelize } from '../../parallel/parallelize.js';
import { CombinedTimestepGuidanceTextProjEmbeddings, CombinedTimestepTextProjEmbeddings } from '../embeddings/combined_timestep_embeddings.js';
import { FluxPosEmbed, RotaryTableCache } from '../embeddings/rotary_pos_embed.js';
import { AdaLayerNormContinuous } from '../normalization/ada_layer_norm.js';
import { fluxParallelPlan } from './flux_plans.js';
import type { RotaryTables } from './flux_attention.js';
import { FluxSingleTransformerBlock } from './flux_single_transformer_block.js';
import { FluxTransformerBlock } from './flux_transformer_block.js';

/** The inputs of FluxTransformer2DModel.forward beside the latents (diffusers' forward arguments, camelCase). */
export interface FluxTransformerCallOptions {
  /** Text tokens [batch, textLength, joint_attention_dim] (T5's last hidden state). */
  encoderHiddenStates: dt.Tensor;
  /** [batch, pooled_projection_dim] (CLIP's pooled output). */
  pooledProjections: dt.Tensor;
  /** [batch] (or one number for every row), in [0, 1]: multiplied by 1000 inside, as diffusers does. */
  timestep: dt.Tensor | number;
  /** Guidance scale [batch] (or one number), for models with guidance_embeds (FLUX.1-dev) only; also multiplied by 1000. */
  guidance?: dt.Tensor | number;
  /** Position ids of the image tokens [imageLength, axes] (diffusers' deprecated [1, imageLength, axes] too). */
  imgIds: dt.Tensor;
  /** Position ids of the text tokens [textLength, axes] (zeros in the Flux pipeline). */
  txtIds: dt.Tensor;
}

/**
 * diffusers' FluxTransformer2DModel: the denoiser of FLUX.1 (dev and schnell), with its checkpoint
 * keys (subfolder "transformer"). Mesh dims 'ulysses' / 'ring' split the tokens, 'tp' heads and
 * MLP features, 'dp' the batch (fluxParallelPlan).
 */
export class FluxTransformer2DModel extends StepCacheModel implements HasJointAttention {
  /** The config the model was built from. */
  readonly config: FluxTransformer2DConfig;
  /** The conditioning vector [batch, innerDim] from the timestep, the pooled text and (guidance_embeds) the guidance scale. */
  time_text_embed: CombinedTimestepTextProjEmbeddings | CombinedTimestepGuidanceTextProjEmbeddings;
  /** Text tokens in: joint_attention_dim to innerDim. */
  context_embedder: nn.Linear;
  /** Packed latent tokens in: in_channels to innerDim. */
  x_embedder: nn.Linear;
  /** diffusers' `transformer_blocks`: the num_layers double-stream blocks, checkpoint keys transformer_blocks.N.*. */
  transformer_blocks: nn.ModuleList<FluxTransformerBlock>;
  /** diffusers' `single_transformer_blocks`: the num_single_layers single-stream blocks, checkpoint keys single_transformer_blocks.N.*. */
  single_transformer_blocks: nn.ModuleList<FluxSingleTransformerBlock>;
  /** The output norm, modulated by the conditioning vector. */
  norm_out: AdaLayerNormContinuous;
  /** Image tokens out: innerDim to patch_size² x out_channels. */
  proj_out: nn.Linear;
  /** The rotary tables of the text and image tokens' position ids (no weights). */
  pos_embed: FluxPosEmbed;
  /** How the text and image tokens join for the single-stream blocks (the context-parallel plan's hook). */
  jointAttention: JointAttention = pieceByPieceJoin;
  // the rotary tables of the last calls' ids (a denoising loop passes the same ones each step)
  readonly #rotary = new RotaryTableCache();

  constructor(config: FluxTransformer2DConfig, options: ModelOptions = {}) {
    super();
    this.config = config;
    const o = { mesh: options.mesh ?? dt.defaultMesh(), dtype: options.dtype ?? config.dtype ?? 'float32' };
    const dim = config.innerDim;
    checkHeadsDivide(fluxParallelPlan, o.mesh, 'FluxTransformer2DModel', 'num_attention_heads', config.numAttentionHeads);
    const heads = [config.numAttentionHeads, config.attentionHeadDim] as const;
    this.time_text_embed = config.guidanceEmbeds
      ? new CombinedTimestepGuidanceTextProjEmbeddings(dim, config.pooledProjectionDim, o)
      : new CombinedTimestepTextProjEmbeddings(dim, config.pooledProjectionDim, o);
    this.context_embedder = new nn.Linear(config.jointAttentionDim, dim, o);
    this.x_embedder = new nn.Linear(config.inChannels, dim, o);
    this.transformer_blocks = new nn.ModuleList(Array.from({ length: config.numLayers }, () => new FluxTransformerBlock(dim, ...heads, o)));
    this.single_transformer_blocks = new nn.ModuleList(Array.from({ length: config.numSingleLayers }, () => new FluxSingleTransformerBlock(dim, ...heads, o)));
    this.norm_out = new AdaLayerNormContinuous(dim, dim, { ...o, elementwiseAffine: false, eps: 1e-6 });
    this.proj_out = new nn.Linear(dim, config.patchSize * config.patchSize * config.outChannels, o);
    this.pos_embed = new FluxPosEmbed(config.axesDimsRope);
    parallelize(this, o.mesh, fluxParallelPlan);
  }

  /**
   * Frees what the model keeps from its last calls for the next ones (the rotary tables of their
   * ids); a later call makes it again. A pipeline calls it when its denoising loop is done.
   */
  releaseCallCache(): void {
    this.#rotary.dispose();
  }

  /** Frees the weights, and what the model keeps from its last calls. */
  override dispose(): void {
    this.#rotary.dispose();
    super.dispose();
  }

  /** Reads the model's config.json. */
  static readConfig(path: string): FluxTransformer2DConfig {
    return FluxTransformer2DConfig.fromFile(path);
  }

  /**
   * The model from one checkpoint file in BFL's layout (flux1-dev.safetensors, flux1-schnell
   * .safetensors, or ComfyUI's copies with keys under "model.diffusion_model."), as diffusers'
   * from_single_file: keys converted as diffusers converts them, read in place (each rank reads
   * only its slice; fused qkv and linear1 as row slices), the config read from the shapes
   * (`options.config` gives what they do not fix, e.g. axes_dims_rope for heads other than 128),
   * on `options.mesh` in `options.dtype`, loaded and packed as fromPretrained gives it.
   */
  static fromSingleFile(path: string, options?: FromSingleFileOptions): Promise<FluxTransformer2DModel> {
    return fluxFromSingleFile(this, path, options);
  }

  /** The mesh the weights are on; inputs must be on it. */
  get mesh(): dt.DeviceMesh {
    return this.x_embedder.weight.mesh;
  }

  /** @internal Flux LoRAs in diffusers', kohya's, ComfyUI's, BFL's or XLabs' layout. */
  protected override convertLora(file: LoraFile): DiffusersLora {
    return fluxLoraToDiffusers(file.tensors);
  }

  /**
   * The predicted sample [batch, imageLength, patch² · out_channels] for the packed latents
   * `hiddenStates` [batch, imageLength, in_channels], as diffusers' FluxTransformer2DModel.forward
   * gives it (its `.sample`).
   */
  forward(hiddenStates: dt.Tensor, options: FluxTransformerCallOptions): dt.Tensor {
    const { hiddenStates: latents, encoderHiddenStates, pooledProjections, timestep, guidance, imgIds, txtIds } = this.#checkInputs(hiddenStates, options);

    const hidden = this.x_embedder.forward(latents);
    // the conditioning's small tensors freed as it ends (see combined_timestep_embeddings.ts)
    const temb = dt.tidy(() => {
      const t = timestep.to(hidden.dtype).mul(1000);
      return this.time_text_embed instanceof CombinedTimestepGuidanceTextProjEmbeddings
        ? this.time_text_embed.forward(t, guidance!.to(hidden.dtype).mul(1000), pooledProjections)
        : this.time_text_embed.forward(t, pooledProjections);
    });
    const context = this.context_embedder.forward(encoderHiddenStates);
    const rotary = this.#rotary.tables([options.txtIds, options.imgIds], () => this.pos_embed.forward(txtIds, imgIds));

    const cache = this.blockCache;
    const first = this.transformer_blocks.at(0);
    const image =
      cache && first
        ? cache.run(hidden, () => {
            const [c, h] = first.call(hidden, context, temb, rotary);
            return { hidden: h, rest: () => this.#blocks(h, c, temb, rotary, 1, false) };
          })
        : this.#blocks(hidden, context, temb, rotary, 0, true);
    return this.proj_out.forward(this.norm_out.forward(image, temb));
  }

  protected override checkCacheable(what: string): void {
    if (this.config.numLayers < 1 || this.config.numLayers + this.config.numSingleLayers < 2) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: a block cache (First-Block Cache, MagCache) needs a double-stream block and one more block after it; this model has num_layers ${this.config.numLayers}, num_single_layers ${this.config.numSingleLayers}`);
    }
  }

  // The blocks from double block `from` on: the image tokens after the last single block. A
  // block's inputs are freed as soon as the next block has been recorded on them (else the call's
  // tidy would hold all 57 blocks' outputs, 1.6 GiB at 1024², until the end); the first block's
  // too when `freeInputs` (the cache keeps them otherwise).
  #blocks(hidden: dt.Tensor, context: dt.Tensor, temb: dt.Tensor, rotary: RotaryTables, from: number, freeInputs: boolean): dt.Tensor {
    let [h, c] = [hidden, context];
    const free = () => {
      if (h !== hidden || freeInputs) dt.dispose([h, c]);
    };
    for (const block of [...this.transformer_blocks].slice(from)) {
      const [nextContext, nextHidden] = block.call(h, c, temb, rotary);
      free();
      [c, h] = [nextContext, nextHidden];
    }
    const textLength = c.shape[1]!;
    let joint = this.jointAttention.join([c, h], 1);
    free();
    for (const block of this.single_transformer_blocks) {
      const next = block.call(joint, temb, rotary);
      joint.dispose();
      joint = next;
    }
    return this.jointAttention.split(joint, [textLength, joint.shape[1]! - textLength], 1)[1]!;
  }

  // the inputs as tensors on the model's mesh, their shapes checked against each other and the config
  #checkInputs(hiddenStates: dt.Tensor, options: FluxTransformerCallOptions) {
    const what = 'FluxTransformer2DModel';
    const o = checkOptions<FluxTransformerCallOptions>(`${what} options`, options);
    const c = this.config;
    const mesh = this.mesh;
    const tensor = (name: string, value: unknown, shape: (number | string)[]): dt.Tensor => {
      if (!(value instanceof dt.Tensor)) throw invalidParameter(`${what} ${name}`, `a Tensor [${shape.join(', ')}]`, value);
      if (!value.mesh.equals(mesh)) throw new DTorchError(ErrorCode.MeshMismatch, `${what}: ${name} is on ${value.mesh} but the model on ${mesh}; create it on the model's mesh`);
      const ok = value.ndim === shape.length && shape.every((s, i) => typeof s === 'string' || value.shape[i] === s);
      if (!ok) throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: ${name} must be [${shape.join(', ')}], got ${value.describe()}`);
      return value;
    };
    const hidden = tensor('hiddenStates', hiddenStates, ['batch', 'imageLength', c.inChannels]);
    const [batch, imageLength] = hidden.shape as [number, number];
    const context = tensor('encoderHiddenStates', o.encoderHiddenStates, [batch, 'textLength', c.jointAttentionDim]);
    const textLength = context.shape[1]!;
    const pooled = tensor('pooledProjections', o.pooledProjections, [batch, c.pooledProjectionDim]);
    const perRow = (name: string, value: unknown) =>
      typeof value === 'number' && Number.isFinite(value) ? dt.full([batch], value, { dtype: hidden.dtype, mesh }) : tensor(name, value, [batch]);
    const timestep = perRow('timestep', o.timestep);
    if (c.guidanceEmbeds && o.guidance === undefined) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: this model has guidance embeddings (guidance_embeds, as FLUX.1-dev): pass { guidance } (e.g. 3.5)`);
    }
    if (!c.guidanceEmbeds && o.guidance !== undefined) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: this model has no guidance embeddings (guidance_embeds false, as FLUX.1-schnell): leave out { guidance }`);
    }
    const guidance = o.guidance === undefined ? undefined : perRow('guidance', o.guidance);
    const axes = c.axesDimsRope.length;
    // diffusers still takes the older [1, length, axes] ids, with a deprecation warning
    const ids = (name: string, value: unknown, length: number) => {
      if (value instanceof dt.Tensor && value.ndim === 3 && value.shape[0] === 1) {
        log.warn(`${what}: ${name} [1, length, axes] is deprecated (as in diffusers); pass [length, axes]`);
        return tensor(name, value, [1, length, axes]).squeeze(0);
      }
      return tensor(name, value, [length, axes]);
    };
    const imgIds = ids('imgIds', o.imgIds, imageLength);
    const txtIds = ids('txtIds', o.txtIds, textLength);
    return { hiddenStates: hidden, encoderHiddenStates: context, pooledProjections: pooled, timestep, guidance, imgIds, txtIds };
  }
}
