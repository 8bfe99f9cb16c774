// FluxPipeline: FLUX.1 text to image, as diffusers' pipelines/flux/pipeline_flux.py: its
// components, how it is made (from components, fromPretrained, tiny), encodePrompt and decode;
// generate() is the one lifecycle (pipeline_lifecycle.ts) with Flux's hooks (flux_hooks.ts).
// The mesh's dims split the work inside the transformer ('ulysses', 'ring': tokens; 'tp':
// heads; 'dp': the batch; 'cfg': true CFG's branches); the same seed gives the same image on
// every mesh.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkInteger, checkKnownOptions, invalidParameter, log } from '@dtorch/common';
import { AutoencoderKL } from '../../models/autoencoder_kl/autoencoder_kl.js';
import { CLIPTextModel } from '../../models/clip/clip_text_model.js';
import { FluxTransformer2DModel } from '../../models/flux/flux_transformer_2d_model.js';
import { T5EncoderModel } from '../../models/t5/t5_encoder_model.js';
import type * as nn from '@dtorch/nn';
import { fluxLoraToDiffusers, type DiffusersLora } from '../../lora/lora_formats.js';
import type { LoraFile } from '../../lora/lora_state_dict.js';
import type { LoraComponents } from '../../lora/pipeline_lora.js';
import { batchPlacements } from '../../parallel/batch.js';
import { FlowMatchEulerDiscreteScheduler } from '../../schedulers/flow_match_euler_discrete_scheduler.js';
import { PreTrainedTokenizer } from '../../tokenizers/pretrained_tokenizer.js';
import { loadComponents, tinyComponents, type ComponentTable } from '../components.js';
import { DiffusionPipeline, type GenerateOptions, type GenerateOutput, type PipelineOptions } from '../diffusion_pipeline.js';
import { fluxHooks } from './flux_hooks.js';
import { unpackLatents } from './flux_latents.js';
import { encodeFluxPrompt, type FluxEncodePromptOptions, type FluxPromptEmbeds } from './flux_prompt.js';

/** A FluxPipeline's parts, as diffusers' FluxPipeline(...) takes them; text encoders may be left out (then pass promptEmbeds). */
export interface FluxPipelineComponents {
  /** The flow-matching Euler scheduler (dynamic shifting, as FLUX.1's scheduler_config.json). */
  scheduler: FlowMatchEulerDiscreteScheduler;
  /** The VAE that decodes the latents (16 latent channels for FLUX.1). */
  vae: AutoencoderKL;
  /** CLIP-L, for the pooled prompt embedding (diffusers' text_encoder). */
  textEncoder?: CLIPTextModel | null;
  /** CLIP's tokenizer; required with textEncoder. */
  tokenizer?: PreTrainedTokenizer | null;
  /** T5-XXL's encoder, for the prompt's hidden states (diffusers' text_encoder_2). */
  textEncoder2?: T5EncoderModel | null;
  /** T5's tokenizer; required with textEncoder2. */
  tokenizer2?: PreTrainedTokenizer | null;
  /** The denoiser. */
  transformer: FluxTransformer2DModel;
}

/** FluxPipeline's settings beside its components. */
export interface FluxPipelineInit {
  /** The default image side in latents (diffusers' default_sample_size, 128): height and width default to it times the VAE's scale factor. */
  defaultSampleSize?: number;
}

/** generate()'s options for Flux (diffusers' FluxPipeline.__call__ arguments, camelCase). */
export interface FluxGenerateOptions extends Omit<GenerateOptions, 'prompt3' | 'negativePrompt3'> {
  /** Custom sigmas, one per step (default linspace(1, 1/steps, steps), as diffusers). */
  sigmas?: readonly number[];
}

/** The pipeline classes of FluxPipeline's components (model_index.json's _class_name): a folder of any of them loads as any. */
export const FLUX_PIPELINES = ['FluxPipeline', 'FluxImg2ImgPipeline', 'FluxInpaintPipeline', 'FluxFillPipeline', 'FluxKontextPipeline'] as const;

// model_index.json's components, as the constructor takes them
/** FluxPipeline's components as model_index.json names them (shared by the variants). */
export const FLUX_COMPONENTS: ComponentTable<FluxPipelineComponents> = {
  scheduler: { folder: 'scheduler', classes: ['FlowMatchEulerDiscreteScheduler'] },
  textEncoder: { folder: 'text_encoder', classes: ['CLIPTextModel'], textEncoder: true, optional: true },
  tokenizer: { folder: 'tokenizer', optional: true },
  textEncoder2: { folder: 'text_encoder_2', classes: ['T5EncoderModel'], textEncoder: true, optional: true },
  tokenizer2: { folder: 'tokenizer_2', optional: true },
  transformer: { folder: 'transformer', classes: ['FluxTransformer2DModel'] },
  vae: { folder: 'vae', classes: ['AutoencoderKL'] },
};
// the mesh dims Flux splits work over; others repeat it
const FLUX_DIMS = ['ulysses', 'ring', 'tp', 'dp', 'cfg'];

/**
 * FLUX.1 text to image, as diffusers' FluxPipeline: FluxPipeline.fromPretrained (a folder or hub
 * id), FluxPipeline.tiny (built in, random weights), or `new FluxPipeline(components)`; then
 * generate(). The mesh's dims 'ulysses', 'ring', 'tp', 'dp' and 'cfg' split the work; the same
 * seed gives the same image on every mesh.
 */
export class FluxPipeline extends DiffusionPipeline {
  /** The scheduler; generate() sets its timesteps. */
  readonly scheduler: FlowMatchEulerDiscreteScheduler;
  /** The VAE that decodes the final latents. */
  readonly vae: AutoencoderKL;
  /** CLIP-L (diffusers' text_encoder); null when left out or after releaseTextEncoders(). */
  textEncoder: CLIPTextModel | null;
  /** CLIP's tokenizer, or null. */
  readonly tokenizer: PreTrainedTokenizer | null;
  /** T5's encoder (diffusers' text_encoder_2); null when left out or after releaseTextEncoders(). */
  textEncoder2: T5EncoderModel | null;
  /** T5's tokenizer, or null. */
  readonly tokenizer2: PreTrainedTokenizer | null;
  /** The denoiser; its mesh is the pipeline's. */
  readonly transformer: FluxTransformer2DModel;
  /** 2^(VAE levels - 1): image pixels per latent (8 for FLUX.1). */
  readonly vaeScaleFactor: number;
  /** Latents per image side by default (diffusers' default_sample_size). */
  readonly defaultSampleSize: number;

  constructor(components: FluxPipelineComponents, options?: FluxPipelineInit) {
    super();
    const what = 'FluxPipeline';
    const c = checkKnownOptions<FluxPipelineComponents>(`${what} components`, components, ['scheduler', 'vae', 'textEncoder', 'tokenizer', 'textEncoder2', 'tokenizer2', 'transformer']);
    const o = checkKnownOptions<FluxPipelineInit>(`${what} options`, options, ['defaultSampleSize']);
    const need = <T>(name: string, value: unknown, cls: abstract new (...args: never[]) => T, optional: boolean): T | null => {
      if (optional && (value === undefined || value === null)) return null;
      if (!(value instanceof cls)) throw invalidParameter(`${what} ${name}`, cls.name, value);
      return value;
    };
    this.scheduler = need('scheduler', c.scheduler, FlowMatchEulerDiscreteScheduler, false)!;
    this.vae = need('vae', c.vae, AutoencoderKL, false)!;
    this.transformer = need('transformer', c.transformer, FluxTransformer2DModel, false)!;
    this.textEncoder = need('textEncoder', c.textEncoder, CLIPTextModel, true);
    this.tokenizer = need('tokenizer', c.tokenizer, PreTrainedTokenizer, true);
    this.textEncoder2 = need('textEncoder2', c.textEncoder2, T5EncoderModel, true);
    this.tokenizer2 = need('tokenizer2', c.tokenizer2, PreTrainedTokenizer, true);
    if ((this.textEncoder && !this.tokenizer) || (this.textEncoder2 && !this.tokenizer2)) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: a text encoder needs its tokenizer (textEncoder with tokenizer, textEncoder2 with tokenizer2)`);
    }
    this.vaeScaleFactor = 2 ** this.vae.config.downsamplings;
    this.defaultSampleSize = o.defaultSampleSize === undefined ? 128 : checkInteger(`${what} defaultSampleSize`, o.defaultSampleSize, 1);
    const t = this.transformer.config;
    // out_channels: FLUX.1-Fill's transformer takes more in (the masked picture's latents and the mask)
    if (t.outChannels % 4 !== 0 || t.outChannels / 4 !== this.vae.config.latentChannels) {
      throw new DTorchError(ErrorCode.BadConfig, `${what}: the transformer's out_channels (${t.outChannels}) must be 4 x the VAE's latent_channels (${this.vae.config.latentChannels}): 2x2 patches of latents`);
    }
    const other = (this.mesh.dimNames ?? []).filter((n) => !FLUX_DIMS.includes(n));
    if (other.length) log.warn(`${what}: mesh dims ${other.map((n) => `'${n}'`).join(', ')} are not ones Flux splits work over (${FLUX_DIMS.join(', ')}); the work is repeated on them`);
  }

  /** The mesh of the transformer and of the denoising loop. */
  get mesh(): dt.DeviceMesh {
    return this.transformer.mesh;
  }

  /** The dtype of the transformer (and of the latents). */
  get dtype(): dt.DType {
    return this.transformer.x_embedder.weight.dtype;
  }

  /** The built-in tiny-flux: random weights (tiny-flux.json's configs and seeds), real tokenizers, made here with no download. */
  static async tiny(options?: PipelineOptions): Promise<FluxPipeline> {
    // `this`: a variant (a subclass) made from the same components is of its own class
    return new (this ?? FluxPipeline)(await tinyComponents('FluxPipeline.tiny', 'tiny-flux', FLUX_COMPONENTS, options));
  }

  /**
   * The pipeline at `source` (a folder diffusers' save_pretrained wrote, or a hub id): each
   * component from its subfolder, the transformer and the VAE on `mesh`, the text encoders on
   * `textEncoderMesh` (default `mesh`), all in `dtype`.
   */
  static override async fromPretrained(source: string, options?: PipelineOptions): Promise<FluxPipeline> {
    return new (this ?? FluxPipeline)(await loadComponents(`${this?.name ?? 'FluxPipeline'}.fromPretrained`, FLUX_PIPELINES, FLUX_COMPONENTS, source, options));
  }

  /**
   * The prompts encoded for the transformer, as diffusers' encode_prompt: CLIP's pooled output and
   * T5's hidden states at maxSequenceLength tokens (each prompt's rows repeated
   * numImagesPerPrompt times), and the text ids. Given promptEmbeds and pooledPromptEmbeds, those
   * (repeated, placed) instead.
   */
  encodePrompt(options: FluxEncodePromptOptions): Promise<FluxPromptEmbeds> {
    return encodeFluxPrompt(this, 'FluxPipeline.encodePrompt', options);
  }

  /** Frees both text encoders (after encoding the prompts, to make room); generate then needs promptEmbeds. */
  releaseTextEncoders(): void {
    this.textEncoder?.dispose();
    this.textEncoder2?.dispose();
    this.textEncoder = null;
    this.textEncoder2 = null;
  }

  /**
   * diffusers' FluxPipeline.__call__: 28 steps, guidance 3.5 (as the guidance embedding, for
   * models with guidance_embeds), 512 T5 tokens, the size of defaultSampleSize latents (1024²
   * for FLUX.1), true CFG when trueCfgScale > 1 and a negative prompt is given. outputType 'png'
   * (default), 'tensor' ([B, 3, H, W] in [0, 1]) or 'latent' (the packed latents
   * [B, (H/16)·(W/16), 64], as diffusers' output_type="latent").
   */
  generate(options: FluxGenerateOptions & { outputType: 'tensor' | 'latent' }): Promise<GenerateOutput<dt.Tensor>>;
  generate(options: FluxGenerateOptions & { outputType?: 'png' }): Promise<GenerateOutput<Buffer[]>>;
  generate(options: FluxGenerateOptions): Promise<GenerateOutput>;
  generate(options: FluxGenerateOptions): Promise<GenerateOutput> {
    return this.generateWith('FluxPipeline.generate', fluxHooks, options);
  }

  /**
   * Packed latents [B, tokens, C·4] of a latentHeight x latentWidth grid to the VAE's images
   * [B, 3, H, W] in [-1, 1]; the VAE splits the image's rows over every mesh dim the batch does
   * not split (vae.disablePatchParallel() or enablePatchParallel(dims) choose otherwise).
   */
  decode(packed: dt.Tensor, latentHeight: number, latentWidth: number): dt.Tensor {
    const vae = this.vae;
    const latents = dt.tidy(() => {
      let z = unpackLatents(packed, latentHeight, latentWidth);
      if (!z.mesh.equals(vae.mesh)) z = z.redistribute(vae.mesh, batchPlacements(vae.mesh));
      if (z.dtype !== vae.dtype) z = z.to(vae.dtype);
      z = z.div(vae.scalingFactor);
      return vae.shiftFactor === null ? z : z.add(vae.shiftFactor);
    });
    try {
      // rows split over the mesh dims that idle while the VAE runs, unless the user chose otherwise
      return dt.tidy(() => vae.decode(latents, { patchParallel: vae.patchParallel ?? true }));
    } finally {
      latents.dispose();
    }
  }

  /** @internal The transformer and both text encoders take LoRAs (diffusers' FluxLoraLoaderMixin; T5's too, which diffusers leaves to PEFT). */
  protected override loraComponents(): LoraComponents {
    return new Map<string, nn.Module | null>([['transformer', this.transformer], ['text_encoder', this.textEncoder], ['text_encoder_2', this.textEncoder2]]);
  }

  /** @internal The models offloading moves, in the order they run: CLIP, T5, the transformer, the VAE. */
  protected override offloadComponents(): ReadonlyMap<string, nn.Module | null> {
    return new Map<string, nn.Module | null>([['text_encoder', this.textEncoder], ['text_encoder_2', this.textEncoder2], ['transformer', this.transformer], ['vae', this.vae]]);
  }

  /** @internal Flux LoRAs in diffusers', kohya's, ComfyUI's, BFL's or XLabs' layout. */
  protected override convertLora(file: LoraFile): DiffusersLora {
    return fluxLoraToDiffusers(file.tensors);
  }

  override dispose(): void {
    this.releaseTextEncoders();
    this.transformer.dispose();
    this.vae.dispose();
    super.dispose();
  }
}
