// StableDiffusion3Pipeline: text to image with Stable Diffusion 3 / 3.5, as diffusers'
// StableDiffusion3Pipeline: its components, how it is made (from components, fromPretrained,
// tiny), encodePrompt (sd3_prompt.ts), prepareLatents (randn from `seed` as
// torch.Generator("cpu").manual_seed(seed) draws them, in diffusers' shape) and decode
// ((latents / scaling_factor) + shift_factor through the VAE); generate() is the one lifecycle
// (pipeline_lifecycle.ts) with SD3's hooks (sd3_hooks.ts). Parallel: the mesh of the transformer
// is the loop's. Its dims named 'ulysses', 'ring', 'tp' split the transformer's work (its own
// plan); 'dp' splits the batch of images; 'cfg' (size 2) puts the negative and the positive
// branch on the two halves of the mesh; the prediction is gathered after each call, so the
// latents are whole on every device between steps and the same seed gives the same image on
// every mesh.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkInteger, checkKnownOptions, invalidParameter } from '@dtorch/common';
import { AutoencoderKL } from '../../models/autoencoder_kl/autoencoder_kl.js';
import { CLIPTextModelWithProjection } from '../../models/clip/clip_text_model.js';
import { SD3Transformer2DModel } from '../../models/sd3/sd3_transformer_2d_model.js';
import { T5EncoderModel } from '../../models/t5/t5_encoder_model.js';
import type * as nn from '@dtorch/nn';
import type { DiffusersLora } from '../../lora/lora_formats.js';
import type { LoraFile } from '../../lora/lora_state_dict.js';
import type { LoraComponents } from '../../lora/pipeline_lora.js';
import { sd3LoraToDiffusers } from '../../lora/sd3_lora_formats.js';
import type { TinyPipelineOptions } from '../../registry.js';
import { FlowMatchEulerDiscreteScheduler } from '../../schedulers/flow_match_euler_discrete_scheduler.js';
import type { PreTrainedTokenizer } from '../../tokenizers/pretrained_tokenizer.js';
import { loadComponents, tinyComponents, type ComponentTable } from '../components.js';
import { DiffusionPipeline, type GenerateOptions, type GenerateOutput, type PipelineOptions } from '../diffusion_pipeline.js';
import { initialLatents } from '../pipeline_inputs.js';
import { sd3Hooks } from './sd3_hooks.js';
import { encodeSD3Prompt, promptTargetOf, textEncodersOf, type SD3EncodePromptOptions, type SD3PromptEmbeds, type SD3TextEncoders } from './sd3_prompt.js';

/** A pipeline's parts, as diffusers' StableDiffusion3Pipeline(...) takes them (camelCase); the T5 is optional, as in diffusers. */
export interface StableDiffusion3Components extends SD3TextEncoders {
  /** The flow-matching Euler scheduler (shift 3.0 for SD3). */
  scheduler: FlowMatchEulerDiscreteScheduler;
  /** The MMDiT denoiser. */
  transformer: SD3Transformer2DModel;
  /** The VAE that decodes the latents (16 latent channels). */
  vae: AutoencoderKL;
}

/** generate()'s options: diffusers' __call__ arguments. */
export interface SD3GenerateOptions extends GenerateOptions {
  /** CLIP layers skipped before the penultimate one. */
  clipSkip?: number;
  /** Custom sigmas, one per step (numInferenceSteps is then their number). */
  sigmas?: readonly number[];
  /** The dynamic shift, for a scheduler with use_dynamic_shifting (default from the image size). */
  mu?: number;
}

/** Where tiny-sd3 lives: the transformer and VAE on `mesh`, the text encoders on `textEncoderMesh` (default `mesh`). */
export type TinySD3Options = TinyPipelineOptions;

/** The pipeline classes of StableDiffusion3Pipeline's components (model_index.json's _class_name): a folder of any of them loads as any. */
export const SD3_PIPELINES = ['StableDiffusion3Pipeline', 'StableDiffusion3Img2ImgPipeline', 'StableDiffusion3InpaintPipeline'] as const;

// model_index.json's components, as the constructor takes them
const COMPONENTS: ComponentTable<StableDiffusion3Components> = {
  scheduler: { folder: 'scheduler', classes: ['FlowMatchEulerDiscreteScheduler'] },
  textEncoder: { folder: 'text_encoder', classes: ['CLIPTextModelWithProjection'], textEncoder: true },
  tokenizer: { folder: 'tokenizer' },
  textEncoder2: { folder: 'text_encoder_2', classes: ['CLIPTextModelWithProjection'], textEncoder: true },
  tokenizer2: { folder: 'tokenizer_2' },
  textEncoder3: { folder: 'text_encoder_3', classes: ['T5EncoderModel'], textEncoder: true, optional: true },
  tokenizer3: { folder: 'tokenizer_3', optional: true },
  transformer: { folder: 'transformer', classes: ['SD3Transformer2DModel'] },
  vae: { folder: 'vae', classes: ['AutoencoderKL'] },
};

const what = 'StableDiffusion3Pipeline';

/** tiny-sd3's components (assets/tiny-pipelines/tiny-sd3.json), as StableDiffusion3Pipeline's constructor takes them: the T5 with the rest. */
export function tinySD3Components(options: TinySD3Options = {}): Promise<StableDiffusion3Components & Required<Pick<SD3TextEncoders, 'textEncoder3' | 'tokenizer3'>>> {
  return tinyComponents(`${what}.tiny`, 'tiny-sd3', COMPONENTS, options) as Promise<StableDiffusion3Components & Required<Pick<SD3TextEncoders, 'textEncoder3' | 'tokenizer3'>>>;
}

/**
 * Stable Diffusion 3 / 3.5 text to image, as diffusers' StableDiffusion3Pipeline:
 * StableDiffusion3Pipeline.fromPretrained (a folder or hub id), StableDiffusion3Pipeline.tiny
 * (built in, random weights), or `new StableDiffusion3Pipeline(components)`; then generate().
 * The mesh's dims 'ulysses', 'ring', 'tp' split the transformer, 'dp' the images, 'cfg' the
 * guidance branches; the same seed gives the same image on every mesh.
 */
export class StableDiffusion3Pipeline extends DiffusionPipeline {
  /** The scheduler; generate() sets its timesteps. */
  scheduler: FlowMatchEulerDiscreteScheduler;
  /** CLIP-L with projection (diffusers' text_encoder); undefined after releaseTextEncoders(). */
  textEncoder: CLIPTextModelWithProjection | undefined;
  /** CLIP-L's tokenizer. */
  tokenizer: PreTrainedTokenizer;
  /** CLIP-G with projection (diffusers' text_encoder_2); undefined after releaseTextEncoders(). */
  textEncoder2: CLIPTextModelWithProjection | undefined;
  /** CLIP-G's tokenizer. */
  tokenizer2: PreTrainedTokenizer;
  /** T5-XXL's encoder (diffusers' text_encoder_3); undefined when left out (zeros in its place) or released. */
  textEncoder3: T5EncoderModel | undefined;
  /** T5's tokenizer; undefined without the T5. */
  tokenizer3: PreTrainedTokenizer | undefined;
  /** The MMDiT denoiser; its mesh is the pipeline's. */
  transformer: SD3Transformer2DModel;
  /** The VAE that decodes the final latents. */
  vae: AutoencoderKL;
  /** 2^(VAE levels - 1): image pixels per latent pixel. */
  readonly vaeScaleFactor: number;
  /** The transformer's sample_size: the default latent side (default image side: × vaeScaleFactor). */
  readonly defaultSampleSize: number;
  /** The transformer's patch_size: latent pixels per patch side (2 for SD3). */
  readonly patchSize: number;

  constructor(components: StableDiffusion3Components) {
    super();
    const c = checkKnownOptions<StableDiffusion3Components>(`${what} components`, components, [
      'scheduler', 'textEncoder', 'tokenizer', 'textEncoder2', 'tokenizer2', 'textEncoder3', 'tokenizer3', 'transformer', 'vae',
    ]);
    const need = <T>(name: keyof StableDiffusion3Components, cls: abstract new (...args: never[]) => T): T => {
      const v = c[name];
      if (!(v instanceof cls)) throw invalidParameter(`${what} components.${name}`, cls.name, v);
      return v;
    };
    this.scheduler = need('scheduler', FlowMatchEulerDiscreteScheduler);
    this.textEncoder = need('textEncoder', CLIPTextModelWithProjection);
    this.textEncoder2 = need('textEncoder2', CLIPTextModelWithProjection);
    this.transformer = need('transformer', SD3Transformer2DModel);
    this.vae = need('vae', AutoencoderKL);
    for (const name of ['tokenizer', 'tokenizer2'] as const) {
      if (!c[name] || typeof (c[name] as PreTrainedTokenizer).encode !== 'function') throw invalidParameter(`${what} components.${name}`, 'PreTrainedTokenizer', c[name]);
    }
    this.tokenizer = c.tokenizer!;
    this.tokenizer2 = c.tokenizer2!;
    this.textEncoder3 = c.textEncoder3 === undefined ? undefined : need('textEncoder3', T5EncoderModel);
    this.tokenizer3 = c.tokenizer3;
    if (this.textEncoder3 && !this.tokenizer3) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: textEncoder3 needs tokenizer3 (T5's tokenizer)`);
    this.vaeScaleFactor = 2 ** (this.vae.config.blockOutChannels.length - 1);
    this.defaultSampleSize = this.transformer.config.sampleSize;
    this.patchSize = this.transformer.config.patchSize;
  }

  /** The mesh of the denoising loop: the transformer's. */
  get mesh(): dt.DeviceMesh {
    return this.transformer.mesh;
  }

  /**
   * The pipeline saved at `source` (a folder in diffusers' layout, or a hub id): model_index.json
   * and one subfolder per component; the transformer and the VAE on `mesh`, the text encoders on
   * `textEncoderMesh` (default `mesh`), every model in `dtype`.
   */
  static override async fromPretrained(source: string, options: PipelineOptions = {}): Promise<StableDiffusion3Pipeline> {
    // `this`: a variant (a subclass) made from the same components is of its own class
    return new (this ?? StableDiffusion3Pipeline)(await loadComponents(`${this?.name ?? what}.fromPretrained`, SD3_PIPELINES, COMPONENTS, source, options));
  }

  /**
   * The built-in tiny-sd3 (assets/tiny-pipelines/tiny-sd3.json): SD3's components at toy sizes
   * with deterministic random weights and real tokenizers, made locally with no download;
   * the images are noise, the code paths SD3-medium's.
   */
  static async tiny(options: TinySD3Options = {}): Promise<StableDiffusion3Pipeline> {
    return new (this ?? StableDiffusion3Pipeline)(await tinySD3Components(options));
  }

  /**
   * The prompt's embeddings (and the negative prompt's, for guidance), as diffusers'
   * encode_prompt: on the pipeline's mesh, whole on every device (sd3_prompt.ts).
   */
  async encodePrompt(options: SD3EncodePromptOptions): Promise<SD3PromptEmbeds> {
    const o = checkKnownOptions<SD3EncodePromptOptions>(`${what}.encodePrompt options`, options, [
      'prompt', 'prompt2', 'prompt3', 'negativePrompt', 'negativePrompt2', 'negativePrompt3', 'numImagesPerPrompt',
      'doClassifierFreeGuidance', 'clipSkip', 'maxSequenceLength', 'promptEmbeds', 'pooledPromptEmbeds', 'negativePromptEmbeds', 'negativePooledPromptEmbeds',
    ]);
    if (o.numImagesPerPrompt !== undefined) checkInteger('encodePrompt numImagesPerPrompt', o.numImagesPerPrompt, 1);
    if (o.clipSkip !== undefined) checkInteger('encodePrompt clipSkip', o.clipSkip, 0);
    if (o.maxSequenceLength !== undefined) checkInteger('encodePrompt maxSequenceLength', o.maxSequenceLength, 1, 512);
    return encodeSD3Prompt(`${what}.encodePrompt`, textEncodersOf(this), promptTargetOf(this), o);
  }

  /** Frees the text encoders (after encoding, to make room); generate() then needs promptEmbeds. */
  releaseTextEncoders(): void {
    for (const e of [this.textEncoder, this.textEncoder2, this.textEncoder3]) e?.dispose();
    this.textEncoder = this.textEncoder2 = this.textEncoder3 = undefined;
  }

  /** @internal The transformer and the three text encoders take LoRAs (diffusers' SD3LoraLoaderMixin; T5's too, which diffusers leaves to PEFT). */
  protected override loraComponents(): LoraComponents {
    return new Map<string, nn.Module | null>([
      ['transformer', this.transformer], ['text_encoder', this.textEncoder ?? null], ['text_encoder_2', this.textEncoder2 ?? null], ['text_encoder_3', this.textEncoder3 ?? null],
    ]);
  }

  /** @internal The models offloading moves, in the order they run: CLIP-L, CLIP-G, T5, the transformer, the VAE. */
  protected override offloadComponents(): ReadonlyMap<string, nn.Module | null> {
    return new Map<string, nn.Module | null>([
      ['text_encoder', this.textEncoder ?? null], ['text_encoder_2', this.textEncoder2 ?? null], ['text_encoder_3', this.textEncoder3 ?? null], ['transformer', this.transformer], ['vae', this.vae],
    ]);
  }

  /** @internal SD3 LoRAs in diffusers' or kohya's (sd-scripts') layout. */
  protected override convertLora(file: LoraFile): DiffusersLora {
    return sd3LoraToDiffusers(file.tensors);
  }

  override dispose(): void {
    this.releaseTextEncoders();
    this.transformer.dispose();
    this.vae.dispose();
    super.dispose();
  }

  /** An image per prompt (and per numImagesPerPrompt), as diffusers' __call__ (see the header). */
  generate(options: SD3GenerateOptions & { outputType: 'tensor' | 'latent' }): Promise<GenerateOutput<dt.Tensor>>;
  generate(options?: SD3GenerateOptions & { outputType?: 'png' }): Promise<GenerateOutput<Buffer[]>>;
  generate(options?: SD3GenerateOptions): Promise<GenerateOutput>;
  generate(options: SD3GenerateOptions = {}): Promise<GenerateOutput> {
    return this.generateWith(`${what}.generate`, sd3Hooks, options);
  }

  /** diffusers' prepare_latents: `latents` as given (on the mesh, in `dtype`), or randn from `seed` [batch, in_channels, H / f, W / f]. */
  prepareLatents(batch: number, height: number, width: number, dtype: dt.DType, seed?: number, latents?: dt.Tensor): dt.Tensor {
    const mesh = this.mesh;
    const whole = mesh.shape.map(() => dt.Replicate());
    const shape = [batch, this.transformer.config.inChannels, Math.floor(height / this.vaeScaleFactor), Math.floor(width / this.vaeScaleFactor)];
    if (latents !== undefined) {
      if (!(latents instanceof dt.Tensor)) throw invalidParameter(`${what} latents`, 'Tensor', latents);
      if (latents.shape.join() !== shape.join()) {
        throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: latents must be [${shape.join(', ')}] (batch × numImagesPerPrompt, in_channels, height / ${this.vaeScaleFactor}, width / ${this.vaeScaleFactor}), got ${latents.describe()}`);
      }
      const placed = latents.mesh.equals(mesh) ? latents.redistribute(whole) : latents.redistribute(mesh, whole);
      if (placed.dtype === dtype) return placed;
      const cast = placed.to(dtype);
      if (placed !== latents) placed.dispose();
      return cast;
    }
    // drawn as torch.Generator("cpu").manual_seed(seed) does; kept whole on every device (the
    // steps stack it for guidance and split it as the transformer's inputs are)
    const drawn = initialLatents(`${what}.generate`, shape, seed, mesh, dtype);
    if (drawn.placements.every((p) => p.isReplicate())) return drawn;
    const placed = drawn.redistribute(whole);
    drawn.dispose();
    return placed;
  }

  /**
   * The VAE's output [B, 3, H, W] in [-1, 1] for the final latents, as diffusers'
   * vae.decode((latents / scaling_factor) + shift_factor).sample; `shift: false` leaves the
   * shift out, as diffusers' StableDiffusion3InpaintPipeline decodes. The VAE splits the image's
   * rows over every mesh dim the batch does not split (vae.disablePatchParallel() or
   * enablePatchParallel(dims) choose otherwise).
   */
  decode(latents: dt.Tensor, options: { shift?: boolean } = {}): dt.Tensor {
    const { scalingFactor, shiftFactor } = this.vae.config;
    return dt.tidy(() => {
      const z = latents.div(scalingFactor).add(options.shift === false ? 0 : (shiftFactor ?? 0));
      const onVae = z.mesh.equals(this.vae.mesh) ? z : z.redistribute(this.vae.mesh, this.vae.mesh.shape.map(() => dt.Replicate()));
      // rows split over the mesh dims that idle while the VAE runs, unless the user chose otherwise
      return this.vae.decode(onVae.to(this.vae.dtype), { patchParallel: this.vae.patchParallel ?? true });
    });
  }
}
