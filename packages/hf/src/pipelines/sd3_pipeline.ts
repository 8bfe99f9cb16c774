// StableDiffusion3Pipeline: text to image with Stable Diffusion 3 / 3.5, as diffusers'
// StableDiffusion3Pipeline. generate() reads as diffusers' __call__: checkInputs, encodePrompt
// (sd3_prompt.ts), prepareLatents (randn from `seed` as torch.Generator("cpu").manual_seed(seed)
// draws them, in diffusers' shape), the denoising loop with classifier-free guidance (the
// transformer on [negative; positive] when guidanceScale > 1), decode ((latents / scaling_factor)
// + shift_factor through the VAE) and the output (PNGs, a tensor in [0, 1], or the latents).
// Parallel: the mesh of the transformer is the loop's. Its dims named 'ulysses', 'ring', 'tp'
// split the transformer's work (its own plan); 'dp' splits the batch of images; 'cfg' (size 2)
// puts the negative and the positive branch on the two halves of the mesh (the stacked batch
// split over 'cfg', then 'dp'); the prediction is gathered for the guidance combination, so the
// latents are whole on every device between steps and the same seed gives the same image on
// every mesh. Each step runs in dt.tidy and frees the previous latents: memory stays flat.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkFinite, checkInteger, checkKnownOptions, invalidParameter } from '@dtorch/common';
import { AutoencoderKL } from '../models/autoencoder_kl/autoencoder_kl.js';
import { CLIPTextModelWithProjection } from '../models/clip/clip_text_model.js';
import { SD3Transformer2DModel } from '../models/sd3/sd3_transformer_2d_model.js';
import { T5EncoderModel } from '../models/t5/t5_encoder_model.js';
import { checkPretrainedOptions, repoOptions } from '../loading/options.js';
import { batchPlacementsOver } from '../parallel/batch.js';
import { calculateShift } from '../schedulers/calculate_shift.js';
import { FlowMatchEulerDiscreteScheduler } from '../schedulers/flow_match_euler_discrete_scheduler.js';
import { AutoTokenizer } from '../tokenizers/auto_tokenizer.js';
import type { PreTrainedTokenizer } from '../tokenizers/pretrained_tokenizer.js';
import {
  DiffusionPipeline,
  type GenerateOptions, type GenerateOutput, type PipelineOptions,
} from './diffusion_pipeline.js';
import type { OutputType } from './image_output.js';
import { componentClass, fetchModelIndex } from './model_index.js';
import { tinySD3Components, type TinySD3Options } from './tiny/tiny_sd3.js';
import { checkMemoryFloor, generatePhases } from './memory_floor.js';
import {
  checkGenerateOptions, checkImageSize, checkScale, denoise, imageOutput, imagesPerPrompt, initialLatents, promptList, tensorOption,
} from './pipeline_inputs.js';
import { encodeSD3Prompt, type SD3EncodePromptOptions, type SD3PromptEmbeds, type SD3TextEncoders } from './sd3_prompt.js';

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

const GENERATE_OPTIONS = [
  'prompt', 'prompt2', 'prompt3', 'negativePrompt', 'negativePrompt2', 'negativePrompt3', 'height', 'width',
  'numInferenceSteps', 'guidanceScale', 'seed', 'numImagesPerPrompt', 'maxSequenceLength', 'latents',
  'promptEmbeds', 'pooledPromptEmbeds', 'negativePromptEmbeds', 'negativePooledPromptEmbeds', 'outputType', 'onStep',
  'clipSkip', 'sigmas', 'mu',
] as const;

// the mesh dims a stacked guidance batch is split over, in that order of preference
const GUIDANCE_BATCH_DIMS = ['cfg', 'dp'] as const;
const IMAGE_BATCH_DIMS = ['dp'] as const;

const what = 'StableDiffusion3Pipeline';

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
    const where = `${what}.fromPretrained`;
    const o = checkPretrainedOptions<PipelineOptions>(where, options, ['mesh', 'dtype', 'textEncoderMesh']);
    if (o.textEncoderMesh !== undefined && !(o.textEncoderMesh instanceof dt.DeviceMesh)) throw invalidParameter(`${where} textEncoderMesh`, 'DeviceMesh', o.textEncoderMesh);
    const index = await fetchModelIndex(where, source, o);
    if (index.className !== what) {
      throw new DTorchError(ErrorCode.BadConfig, `${where}: ${source} is a ${index.className}, not a ${what}; load it with DiffusionPipeline.fromPretrained`);
    }
    const expect = (name: string, cls: string) => {
      const found = componentClass(index, name, where);
      if (found !== cls) throw new DTorchError(ErrorCode.BadConfig, `${where}: ${source}'s ${name} is a ${found}; DTorch's ${what} takes a ${cls}`);
    };
    expect('transformer', 'SD3Transformer2DModel');
    expect('vae', 'AutoencoderKL');
    expect('text_encoder', 'CLIPTextModelWithProjection');
    expect('text_encoder_2', 'CLIPTextModelWithProjection');
    expect('scheduler', 'FlowMatchEulerDiscreteScheduler');
    const hasT5 = index.components['text_encoder_3'] != null;
    if (hasT5) expect('text_encoder_3', 'T5EncoderModel');
    const repo = repoOptions(o);
    const mesh = o.mesh ?? dt.defaultMesh();
    const model = (subfolder: string, m: dt.DeviceMesh) => ({ ...repo, subfolder, mesh: m, ...(o.dtype ? { dtype: o.dtype } : {}) });
    const textMesh = o.textEncoderMesh ?? mesh;
    const loaded = await Promise.allSettled([
      FlowMatchEulerDiscreteScheduler.fromPretrained(source, { ...repo, subfolder: 'scheduler' }),
      CLIPTextModelWithProjection.fromPretrained(source, model('text_encoder', textMesh)),
      AutoTokenizer.fromPretrained(source, { ...repo, subfolder: 'tokenizer' }),
      CLIPTextModelWithProjection.fromPretrained(source, model('text_encoder_2', textMesh)),
      AutoTokenizer.fromPretrained(source, { ...repo, subfolder: 'tokenizer_2' }),
      hasT5 ? T5EncoderModel.fromPretrained(source, model('text_encoder_3', textMesh)) : undefined,
      hasT5 ? AutoTokenizer.fromPretrained(source, { ...repo, subfolder: 'tokenizer_3' }) : undefined,
      SD3Transformer2DModel.fromPretrained(source, model('transformer', mesh)),
      AutoencoderKL.fromPretrained(source, model('vae', mesh)),
    ]);
    const failed = loaded.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      for (const r of loaded) if (r.status === 'fulfilled' && r.value && typeof (r.value as { dispose?: unknown }).dispose === 'function') (r.value as { dispose(): void }).dispose();
      throw failed.reason;
    }
    const [scheduler, textEncoder, tokenizer, textEncoder2, tokenizer2, textEncoder3, tokenizer3, transformer, vae] = loaded.map((r) => (r as PromiseFulfilledResult<unknown>).value);
    return new StableDiffusion3Pipeline({
      scheduler, textEncoder, tokenizer, textEncoder2, tokenizer2, textEncoder3, tokenizer3, transformer, vae,
    } as StableDiffusion3Components);
  }

  /**
   * The built-in tiny-sd3 (assets/tiny-pipelines/tiny-sd3.json): SD3's components at toy sizes
   * with deterministic random weights and real tokenizers, made locally in well under a second;
   * the images are noise, the code paths SD3-medium's.
   */
  static async tiny(options: TinySD3Options = {}): Promise<StableDiffusion3Pipeline> {
    const o = checkKnownOptions<TinySD3Options>(`${what}.tiny options`, options, ['mesh', 'textEncoderMesh', 'dtype']);
    for (const key of ['mesh', 'textEncoderMesh'] as const) if (o[key] !== undefined && !(o[key] instanceof dt.DeviceMesh)) throw invalidParameter(`${what}.tiny ${key}`, 'DeviceMesh', o[key]);
    if (o.dtype !== undefined) dt.checkDtype(o.dtype, `${what}.tiny dtype`);
    return new StableDiffusion3Pipeline(await tinySD3Components(o));
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
    return encodeSD3Prompt(`${what}.encodePrompt`, this.textEncoders(), this.promptTarget(), o);
  }

  private promptTarget() {
    return { mesh: this.mesh, jointAttentionDim: this.transformer.config.jointAttentionDim };
  }

  /** Frees the text encoders (after encoding, to make room); generate() then needs promptEmbeds. */
  releaseTextEncoders(): void {
    for (const e of [this.textEncoder, this.textEncoder2, this.textEncoder3]) e?.dispose();
    this.textEncoder = this.textEncoder2 = this.textEncoder3 = undefined;
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
  async generate(options: SD3GenerateOptions = {}): Promise<GenerateOutput> {
    // a call running when dispose() runs rejects as disposed, not as the freed models fail
    return this.whileLive(`${what}.generate`, () => this.#generate(options));
  }

  async #generate(options: SD3GenerateOptions): Promise<GenerateOutput> {
    const start = performance.now();
    const o = this.checkInputs(options);
    // 1. the prompt
    const embeds = await encodeSD3Prompt(`${what}.generate`, this.textEncoders(), this.promptTarget(), {
      ...pick(o, ['prompt', 'prompt2', 'prompt3', 'negativePrompt', 'negativePrompt2', 'negativePrompt3', 'clipSkip', 'promptEmbeds', 'pooledPromptEmbeds', 'negativePromptEmbeds', 'negativePooledPromptEmbeds']),
      numImagesPerPrompt: o.numImagesPerPrompt,
      maxSequenceLength: o.maxSequenceLength,
      doClassifierFreeGuidance: o.cfg,
    });
    const owned = (t: dt.Tensor | undefined) => t && t !== o.promptEmbeds && t !== o.pooledPromptEmbeds && t !== o.negativePromptEmbeds && t !== o.negativePooledPromptEmbeds;
    const [context, pooled] = this.denoiserInputs(embeds, o.cfg);
    for (const t of Object.values(embeds)) if (owned(t)) t.dispose();
    await dt.sync();
    const encoded = performance.now();
    // 2. latents and timesteps
    const latents = this.prepareLatents(o.batch, o.height, o.width, context.dtype, o.seed, o.latents);
    this.setTimesteps(o.numInferenceSteps, latents, o.sigmas, o.mu);
    // 3. the denoising loop
    let final: dt.Tensor;
    try {
      final = await denoise({
        timesteps: this.scheduler.timesteps,
        latents,
        keepFirst: latents === o.latents,
        step: (x, t) => this.denoiseStep(x, t, context, pooled, o.cfg, o.guidanceScale),
        ...(o.onStep ? { onStep: o.onStep } : {}),
        startMs: start,
      });
    } finally {
      context.dispose();
      pooled.dispose();
    }
    await dt.sync();
    const denoised = performance.now();
    // 4. decoding
    if (o.outputType === 'latent') return { images: final, timings: { encodeMs: encoded - start, denoiseMs: denoised - encoded, decodeMs: 0 } };
    const decoded = this.decode(final);
    final.dispose();
    const images = await imageOutput(decoded, o.outputType);
    await dt.sync();
    return { images, timings: { encodeMs: encoded - start, denoiseMs: denoised - encoded, decodeMs: performance.now() - denoised } };
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
   * vae.decode((latents / scaling_factor) + shift_factor).sample.
   */
  decode(latents: dt.Tensor): dt.Tensor {
    const { scalingFactor, shiftFactor } = this.vae.config;
    return dt.tidy(() => {
      const z = latents.div(scalingFactor).add(shiftFactor ?? 0);
      const onVae = z.mesh.equals(this.vae.mesh) ? z : z.redistribute(this.vae.mesh, this.vae.mesh.shape.map(() => dt.Replicate()));
      return this.vae.decode(onVae.to(this.vae.dtype));
    });
  }

  // one step (inside denoise's tidy): the prediction for [negative; positive] (split over 'cfg'
  // / 'dp'), gathered, combined, and the scheduler's step
  private denoiseStep(latents: dt.Tensor, t: number, context: dt.Tensor, pooled: dt.Tensor, cfg: boolean, guidanceScale: number): dt.Tensor {
    const stacked = cfg ? dt.cat([latents, latents], 0) : latents;
    const input = stacked.redistribute(context.placements);
    // the model's part of the step is cut off from the scheduler's, whose sigmas differ per step
    const prediction = dt.graph.step(() => this.transformer.forward(input, { encoderHiddenStates: context, pooledProjections: pooled, timestep: t }));
    let noise = prediction.redistribute(prediction.placements.map(() => dt.Replicate()));
    if (cfg) {
      const [uncond, text] = noise.chunk(2, 0) as [dt.Tensor, dt.Tensor];
      noise = uncond.add(text.sub(uncond).mul(guidanceScale));
    }
    return this.scheduler.step(noise, t, latents).prevSample;
  }

  // the transformer's prompt inputs: [negative; positive] with guidance, the batch split over
  // 'cfg' and 'dp' (only 'dp' without guidance); kept for the whole loop
  private denoiserInputs(embeds: SD3PromptEmbeds, cfg: boolean): [dt.Tensor, dt.Tensor] {
    return dt.tidy(() => {
      const stack = (neg: dt.Tensor | undefined, pos: dt.Tensor) => {
        const t = this.toMesh(cfg ? dt.cat([this.toMesh(neg!), this.toMesh(pos)], 0) : this.toMesh(pos));
        return t.redistribute(batchPlacementsOver(this.mesh, t.shape[0]!, cfg ? GUIDANCE_BATCH_DIMS : IMAGE_BATCH_DIMS));
      };
      const dtype = this.transformer.proj_out.weight.dtype;
      return [stack(embeds.negativePromptEmbeds, embeds.promptEmbeds).to(dtype), stack(embeds.negativePooledPromptEmbeds, embeds.pooledPromptEmbeds).to(dtype)];
    });
  }

  private toMesh(t: dt.Tensor): dt.Tensor {
    const whole = this.mesh.shape.map(() => dt.Replicate());
    return t.mesh.equals(this.mesh) ? t.redistribute(whole) : t.redistribute(this.mesh, whole);
  }

  private setTimesteps(steps: number | undefined, latents: dt.Tensor, sigmas: readonly number[] | undefined, mu: number | undefined): void {
    const cfg = this.scheduler.config;
    let shift = mu;
    if (cfg.useDynamicShifting && shift === undefined) {
      const p = this.patchSize;
      const tokens = Math.floor(latents.shape[2]! / p) * Math.floor(latents.shape[3]! / p);
      shift = calculateShift(tokens, cfg.baseImageSeqLen, cfg.maxImageSeqLen, cfg.baseShift ?? 0.5, cfg.maxShift ?? 1.16);
    }
    this.scheduler.setTimesteps(sigmas ? null : steps, { ...(sigmas ? { sigmas } : {}), ...(shift === undefined ? {} : { mu: shift }) });
  }

  private textEncoders(): SD3TextEncoders | undefined {
    if (!this.textEncoder || !this.textEncoder2) return undefined;
    return { textEncoder: this.textEncoder, tokenizer: this.tokenizer, textEncoder2: this.textEncoder2, tokenizer2: this.tokenizer2, textEncoder3: this.textEncoder3, tokenizer3: this.tokenizer3 };
  }

  // diffusers' check_inputs and defaults, each error at the call
  private checkInputs(options: SD3GenerateOptions) {
    if (options && typeof options === 'object' && 'trueCfgScale' in options) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}.generate: trueCfgScale is FluxPipeline's; Stable Diffusion 3 guides with guidanceScale (classifier-free guidance when > 1)`);
    }
    const call = `${what}.generate`;
    const o = checkGenerateOptions<SD3GenerateOptions>(call, options, GENERATE_OPTIONS);
    const sample = this.defaultSampleSize * this.vaeScaleFactor;
    const { height, width } = checkImageSize(call, o.height ?? sample, o.width ?? sample, this.vaeScaleFactor * this.patchSize);
    // the transformer's position table covers pos_embed_max_size patches a side
    const largest = this.transformer.config.posEmbedMaxSize * this.patchSize * this.vaeScaleFactor;
    if (height > largest || width > largest) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${call}: ${width}x${height} (width x height) is larger than this model takes: at most ${largest} a side (pos_embed_max_size ${this.transformer.config.posEmbedMaxSize} x patch ${this.patchSize} x VAE scale ${this.vaeScaleFactor})`);
    }
    const numInferenceSteps = o.sigmas ? undefined : this.scheduler.checkSteps(`${call} numInferenceSteps`, o.numInferenceSteps ?? 28);
    const guidanceScale = checkScale(`${call} guidanceScale`, o.guidanceScale ?? 7.0);
    const numImagesPerPrompt = imagesPerPrompt(call, o.numImagesPerPrompt);
    const maxSequenceLength = o.maxSequenceLength ?? 256;
    if (!Number.isInteger(maxSequenceLength) || maxSequenceLength < 1 || maxSequenceLength > 512) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}.generate: maxSequenceLength cannot be greater than 512 (nor less than 1) but is ${maxSequenceLength}`);
    }
    if (o.seed !== undefined) checkInteger(`${call} seed`, o.seed, 0, 2 ** 48 - 1);
    const outputType: OutputType = o.outputType ?? 'png';
    if (o.sigmas !== undefined && (!Array.isArray(o.sigmas) || o.sigmas.length === 0)) throw invalidParameter(`${what}.generate sigmas`, 'a non-empty array of numbers', o.sigmas);
    if (o.mu !== undefined) checkFinite(`${what}.generate mu`, o.mu);
    const cfg = guidanceScale > 1;
    // prompts or their embeddings, not both
    for (const [text, embeds] of [['prompt', 'promptEmbeds'], ['prompt2', 'promptEmbeds'], ['prompt3', 'promptEmbeds'], ['negativePrompt', 'negativePromptEmbeds'], ['negativePrompt2', 'negativePromptEmbeds'], ['negativePrompt3', 'negativePromptEmbeds']] as const) {
      if (o[text] !== undefined && o[embeds] !== undefined) throw new DTorchError(ErrorCode.InvalidArgument, `${what}.generate: give ${text} or ${embeds}, not both`);
    }
    if (o.prompt === undefined && o.promptEmbeds === undefined) throw new DTorchError(ErrorCode.InvalidArgument, `${what}.generate: give prompt or promptEmbeds`);
    for (const [embeds, pooled] of [['promptEmbeds', 'pooledPromptEmbeds'], ['negativePromptEmbeds', 'negativePooledPromptEmbeds']] as const) {
      if (o[embeds] === undefined) continue;
      tensorOption(call, embeds, o[embeds], 3);
      if (o[pooled] === undefined) throw new DTorchError(ErrorCode.InvalidArgument, `${call}: with ${embeds} give ${pooled} too (from the same text encoders)`);
      tensorOption(call, pooled, o[pooled], 2);
    }
    const c = this.transformer.config;
    let batch: number;
    if (o.promptEmbeds) {
      const [e, p] = [o.promptEmbeds, o.pooledPromptEmbeds!];
      if (e.ndim !== 3 || e.shape[2] !== c.jointAttentionDim || p.ndim !== 2 || p.shape[0] !== e.shape[0] || p.shape[1] !== c.pooledProjectionDim) {
        throw new DTorchError(ErrorCode.ShapeMismatch, `${what}.generate: promptEmbeds must be [batch, tokens, ${c.jointAttentionDim}] and pooledPromptEmbeds [batch, ${c.pooledProjectionDim}], got ${e.describe()} and ${p.describe()}`);
      }
      if (o.negativePromptEmbeds && (o.negativePromptEmbeds.shape.join() !== e.shape.join() || o.negativePooledPromptEmbeds!.shape.join() !== p.shape.join())) {
        throw new DTorchError(ErrorCode.ShapeMismatch, `${what}.generate: negativePromptEmbeds and negativePooledPromptEmbeds must have the shapes of promptEmbeds and pooledPromptEmbeds, got ${o.negativePromptEmbeds.describe()} and ${o.negativePooledPromptEmbeds!.describe()}`);
      }
      if (numImagesPerPrompt !== 1) throw new DTorchError(ErrorCode.InvalidArgument, `${what}.generate: numImagesPerPrompt is for prompts; give promptEmbeds one row per image`);
      batch = e.shape[0]!;
    } else {
      batch = promptList(call, 'prompt', o.prompt)!.length * numImagesPerPrompt;
    }
    if (cfg && o.promptEmbeds && !o.negativePromptEmbeds && !this.textEncoders()) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}.generate: guidanceScale ${guidanceScale} > 1 needs the negative prompt's embeddings; the text encoders were released, so pass negativePromptEmbeds and negativePooledPromptEmbeds`);
    }
    const clipTokens = this.tokenizer.modelMaxLength > 1e6 ? 77 : this.tokenizer.modelMaxLength;
    this.checkMemory(call, batch, cfg, height, width, o.promptEmbeds ? o.promptEmbeds.shape[1]! : clipTokens + maxSequenceLength, outputType);
    return { ...o, height, width, numInferenceSteps, guidanceScale, numImagesPerPrompt, maxSequenceLength, outputType, cfg, batch };
  }

  // the call's memory floor (memory_floor.ts), the guidance branches stacked
  private checkMemory(call: string, batch: number, cfg: boolean, height: number, width: number, textTokens: number, outputType: OutputType): void {
    const t = this.transformer.config;
    const [latentHeight, latentWidth] = [Math.floor(height / this.vaeScaleFactor), Math.floor(width / this.vaeScaleFactor)];
    const phases = generatePhases({
      images: batch, rows: cfg ? 2 * batch : batch, latents: [batch, t.inChannels, latentHeight, latentWidth],
      imageTokens: Math.floor(latentHeight / this.patchSize) * Math.floor(latentWidth / this.patchSize), textTokens,
      textWidth: t.jointAttentionDim, width: t.captionProjectionDim, dtype: this.transformer.proj_out.weight.dtype, imageHeight: height, imageWidth: width,
      decoder: outputType === 'latent' ? undefined : { channels: this.vae.config.blockOutChannels[0]!, dtype: this.vae.dtype },
    });
    checkMemoryFloor(call, [this.mesh, this.vae.mesh], phases, 'lower height and width, or numImagesPerPrompt');
  }
}

function pick<T extends object, K extends keyof T>(o: T, keys: readonly K[]): Pick<T, K> {
  return Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]])) as Pick<T, K>;
}
