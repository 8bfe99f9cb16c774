// FluxPipeline: FLUX.1 text to image, as diffusers' pipelines/flux/pipeline_flux.py. It reads
// as its steps: encodePrompt (CLIP's pooled output, T5's hidden states), prepareLatents (seeded
// noise in diffusers' shape, packed into 2x2 patches), the denoising loop (the transformer's
// velocity, true CFG when asked, the flow-matching Euler step, timesteps shifted by `mu` from
// the image size) and decode (unpacked, unscaled, through the VAE). The mesh's dims split the
// work inside the transformer ('ulysses', 'ring': tokens; 'tp': heads; 'dp': the batch); the
// same seed gives the same image on every mesh.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkInteger, checkKnownOptions, invalidParameter, log } from '@dtorch/common';
import { checkPretrainedOptions, repoOptions } from '../loading/options.js';
import { AutoencoderKL } from '../models/autoencoder_kl/autoencoder_kl.js';
import { CLIPTextModel } from '../models/clip/clip_text_model.js';
import { FluxTransformer2DModel } from '../models/flux/flux_transformer_2d_model.js';
import { T5EncoderModel } from '../models/t5/t5_encoder_model.js';
import { batchPlacements } from '../parallel/batch.js';
import { FlowMatchEulerDiscreteScheduler, calculateShift } from '../schedulers/index.js';
import { linspace } from '../schedulers/sigma_math.js';
import { AutoTokenizer } from '../tokenizers/auto_tokenizer.js';
import { PreTrainedTokenizer } from '../tokenizers/pretrained_tokenizer.js';
import { DiffusionPipeline, type GenerateOptions, type GenerateOutput, type PipelineOptions } from './diffusion_pipeline.js';
import { latentImageIds, packLatents, textIds, unpackLatents } from './flux_latents.js';
import { clipPooledEmbeds, t5PromptEmbeds } from './flux_prompt.js';
import type { OutputType } from './image_output.js';
import { componentClass, fetchModelIndex } from './model_index.js';
import {
  checkDpDivides, checkGenerateOptions, checkImageSize, checkScale, denoise, dpPlacements, imageOutput, imagesPerPrompt, initialLatents, promptList, promptsFor, repeatPerPrompt, tensorOption,
} from './pipeline_inputs.js';
import { checkMemoryFloor, generatePhases } from './memory_floor.js';
import { tinyFluxComponents } from './tiny/tiny_flux.js';

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

/** diffusers' encode_prompt arguments, camelCase. */
export interface FluxEncodePromptOptions {
  /** CLIP's prompt, or a list of prompts; T5's too unless prompt2 is given. */
  prompt?: string | readonly string[];
  /** T5's prompt (default `prompt`). */
  prompt2?: string | readonly string[];
  /** Rows per prompt in the result (default 1). */
  numImagesPerPrompt?: number;
  /** Already encoded (then no text encoder runs): T5's hidden states [batch, length, joint_attention_dim]. */
  promptEmbeds?: dt.Tensor;
  /** CLIP's pooled output [batch, pooled_projection_dim], with promptEmbeds. */
  pooledPromptEmbeds?: dt.Tensor;
  /** T5's tokens (default 512, at most 512). */
  maxSequenceLength?: number;
}

/** What encodePrompt returns, on the pipeline's mesh (batch split over 'dp') in the transformer's dtype; the caller owns them. */
export interface FluxPromptEmbeds {
  /** [batch · numImagesPerPrompt, maxSequenceLength, joint_attention_dim]. */
  promptEmbeds: dt.Tensor;
  /** [batch · numImagesPerPrompt, pooled_projection_dim]. */
  pooledPromptEmbeds: dt.Tensor;
  /** [maxSequenceLength, 3] zeros: the text tokens' position ids. */
  textIds: dt.Tensor;
}

// generate()'s settings once checked, defaults filled in
interface FluxCall {
  height: number;
  width: number;
  steps: number;
  sigmas: number[] | undefined;
  guidanceScale: number;
  trueCfgScale: number;
  trueCfg: boolean;
  outputType: OutputType;
  numImagesPerPrompt: number;
  maxSequenceLength: number;
}

const GENERATE_OPTIONS = [
  'prompt', 'prompt2', 'negativePrompt', 'negativePrompt2', 'height', 'width', 'numInferenceSteps', 'sigmas', 'guidanceScale', 'trueCfgScale',
  'seed', 'numImagesPerPrompt', 'maxSequenceLength', 'latents', 'promptEmbeds', 'pooledPromptEmbeds', 'negativePromptEmbeds',
  'negativePooledPromptEmbeds', 'outputType', 'onStep',
] as const;
const ENCODE_OPTIONS = ['prompt', 'prompt2', 'numImagesPerPrompt', 'promptEmbeds', 'pooledPromptEmbeds', 'maxSequenceLength'] as const;
const MAX_SEQUENCE_LENGTH = 512;
// the mesh dims Flux splits work over; others repeat it
const FLUX_DIMS = ['ulysses', 'ring', 'tp', 'dp', 'cfg'];
// model_index.json's component classes this pipeline loads
const COMPONENT_CLASSES: Record<string, readonly string[]> = {
  scheduler: ['FlowMatchEulerDiscreteScheduler'],
  text_encoder: ['CLIPTextModel'],
  text_encoder_2: ['T5EncoderModel'],
  transformer: ['FluxTransformer2DModel'],
  vae: ['AutoencoderKL'],
};

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
  // generate() calls take turns: each sets the scheduler's timesteps and steps through them
  #turn: Promise<unknown> = Promise.resolve();

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
    if (t.inChannels % 4 !== 0 || t.inChannels / 4 !== this.vae.config.latentChannels) {
      throw new DTorchError(ErrorCode.BadConfig, `${what}: the transformer's in_channels (${t.inChannels}) must be 4 x the VAE's latent_channels (${this.vae.config.latentChannels}): 2x2 patches of latents`);
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
    const what = 'FluxPipeline.tiny';
    const o = checkKnownOptions<PipelineOptions>(`${what} options`, options, ['mesh', 'textEncoderMesh', 'dtype']);
    const { mesh, textEncoderMesh } = meshesOf(what, o);
    if (o.dtype !== undefined) dt.checkDtype(o.dtype, `${what} dtype`);
    return new FluxPipeline(await tinyFluxComponents(mesh, textEncoderMesh, o.dtype));
  }

  /**
   * The pipeline at `source` (a folder diffusers' save_pretrained wrote, or a hub id): each
   * component from its subfolder, the transformer and the VAE on `mesh`, the text encoders on
   * `textEncoderMesh` (default `mesh`), all in `dtype`.
   */
  static override async fromPretrained(source: string, options?: PipelineOptions): Promise<FluxPipeline> {
    const what = 'FluxPipeline.fromPretrained';
    const o = checkPretrainedOptions<PipelineOptions>(what, options, ['mesh', 'dtype', 'textEncoderMesh']);
    const { mesh, textEncoderMesh } = meshesOf(what, o);
    const index = await fetchModelIndex(what, source, o);
    if (index.className !== 'FluxPipeline') {
      throw new DTorchError(ErrorCode.BadConfig, `${what}: ${source} is a ${index.className}, not a FluxPipeline; load it with DiffusionPipeline.fromPretrained or its own class`);
    }
    for (const [name, classes] of Object.entries(COMPONENT_CLASSES)) {
      const entry = index.components[name];
      if (entry === null && name.startsWith('text_encoder')) continue;
      const cls = componentClass(index, name, what);
      if (!classes.includes(cls)) throw new DTorchError(ErrorCode.BadConfig, `${what}: ${source}'s ${name} is a ${cls}; FluxPipeline takes ${classes.join(' or ')}`);
    }
    const repo = repoOptions(o);
    const has = (name: string) => Boolean(index.components[name]);
    const loaded: { dispose(): void }[] = [];
    const load = async <T extends { dispose(): void }>(p: Promise<T>) => {
      const model = await p;
      loaded.push(model);
      return model;
    };
    try {
      const scheduler = await FlowMatchEulerDiscreteScheduler.fromPretrained(source, { ...repo, subfolder: 'scheduler' });
      const textEncoder = has('text_encoder') ? await load(CLIPTextModel.fromPretrained(source, { ...repo, subfolder: 'text_encoder', mesh: textEncoderMesh, dtype: o.dtype })) : null;
      const tokenizer = has('tokenizer') ? await AutoTokenizer.fromPretrained(source, { ...repo, subfolder: 'tokenizer' }) : null;
      const textEncoder2 = has('text_encoder_2') ? await load(T5EncoderModel.fromPretrained(source, { ...repo, subfolder: 'text_encoder_2', mesh: textEncoderMesh, dtype: o.dtype })) : null;
      const tokenizer2 = has('tokenizer_2') ? await AutoTokenizer.fromPretrained(source, { ...repo, subfolder: 'tokenizer_2' }) : null;
      const transformer = await load(FluxTransformer2DModel.fromPretrained(source, { ...repo, subfolder: 'transformer', mesh, dtype: o.dtype }));
      const vae = await load(AutoencoderKL.fromPretrained(source, { ...repo, subfolder: 'vae', mesh, dtype: o.dtype }));
      return new FluxPipeline({ scheduler, textEncoder, tokenizer, textEncoder2, tokenizer2, transformer, vae });
    } catch (err) {
      for (const model of loaded) model.dispose();
      throw err;
    }
  }

  /**
   * The prompts encoded for the transformer, as diffusers' encode_prompt: CLIP's pooled output and
   * T5's hidden states at maxSequenceLength tokens (each prompt's rows repeated
   * numImagesPerPrompt times), and the text ids. Given promptEmbeds and pooledPromptEmbeds, those
   * (repeated, placed) instead.
   */
  async encodePrompt(options: FluxEncodePromptOptions): Promise<FluxPromptEmbeds> {
    const what = 'FluxPipeline.encodePrompt';
    const o = checkKnownOptions<FluxEncodePromptOptions>(`${what} options`, options, ENCODE_OPTIONS);
    const n = imagesPerPrompt(what, o.numImagesPerPrompt);
    const maxSequenceLength = this.#maxSequenceLength(what, o.maxSequenceLength);
    const prompt = promptList(what, 'prompt', o.prompt);
    const prompt2 = promptList(what, 'prompt2', o.prompt2);
    let pooled: dt.Tensor;
    let embeds: dt.Tensor;
    let owned: boolean;
    if (o.promptEmbeds !== undefined) {
      if (prompt || prompt2) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give prompt (and prompt2) or promptEmbeds, not both`);
      if (o.pooledPromptEmbeds === undefined) {
        throw new DTorchError(ErrorCode.InvalidArgument, `${what}: promptEmbeds needs pooledPromptEmbeds too (CLIP's pooled output of the same prompts)`);
      }
      embeds = this.#checkEmbeds(what, 'promptEmbeds', o.promptEmbeds, 3);
      pooled = this.#checkEmbeds(what, 'pooledPromptEmbeds', o.pooledPromptEmbeds, 2);
      if (pooled.shape[0] !== embeds.shape[0]) {
        throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: pooledPromptEmbeds has ${pooled.shape[0]} rows but promptEmbeds ${embeds.shape[0]}`);
      }
      owned = false;
    } else {
      if (!prompt) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give prompt, or promptEmbeds and pooledPromptEmbeds`);
      if (!this.textEncoder || !this.textEncoder2 || !this.tokenizer || !this.tokenizer2) {
        throw new DTorchError(
          ErrorCode.InvalidArgument,
          `${what}: this pipeline has no text encoders (released, or built without them): pass promptEmbeds and pooledPromptEmbeds (from encodePrompt before releaseTextEncoders())`,
        );
      }
      const prompts2 = promptsFor(what, 'prompt2', prompt2 ?? prompt, prompt.length);
      pooled = await clipPooledEmbeds(what, this.textEncoder, this.tokenizer, prompt, this.tokenizer.modelMaxLength > 1e6 ? 77 : this.tokenizer.modelMaxLength);
      try {
        embeds = await t5PromptEmbeds(what, this.textEncoder2, this.tokenizer2, prompts2, maxSequenceLength);
      } catch (err) {
        pooled.dispose();
        throw err;
      }
      owned = true;
    }
    const place = (t: dt.Tensor) => {
      const placed = dt.tidy(() => {
        const whole = t.redistribute(this.mesh, this.mesh.shape.map(() => dt.Replicate()));
        const cast = whole.dtype === this.dtype ? whole : whole.to(this.dtype);
        return repeatPerPrompt(cast, n).redistribute(dpPlacements(this.mesh, t.shape[0]! * n));
      });
      if (owned) t.dispose();
      return placed === t ? dt.tidy(() => t.clone()) : placed; // always the caller's own tensor
    };
    const promptEmbeds = place(embeds);
    const pooledPromptEmbeds = place(pooled);
    return { promptEmbeds, pooledPromptEmbeds, textIds: textIds(promptEmbeds.shape[1]!, this.mesh, this.dtype) };
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
  async generate(options: FluxGenerateOptions): Promise<GenerateOutput> {
    const what = 'FluxPipeline.generate';
    this.checkLive(what);
    const o = checkGenerateOptions<FluxGenerateOptions>(what, options, GENERATE_OPTIONS);
    const call = this.#checkCall(what, o);
    // a call still queued when dispose() runs rejects as disposed, not as the freed models fail
    const run = this.#turn.then(() => this.whileLive(what, () => this.#generate(what, o, call)));
    this.#turn = run.catch(() => undefined);
    return run;
  }

  async #generate(what: string, o: Partial<FluxGenerateOptions>, call: FluxCall): Promise<GenerateOutput> {
    const startMs = performance.now();
    const owned: dt.Tensor[] = [];
    try {
      // 1. the prompts, and with true CFG the negative prompts, encoded
      const positive = await this.encodePrompt({
        prompt: o.prompt, prompt2: o.prompt2, promptEmbeds: o.promptEmbeds, pooledPromptEmbeds: o.pooledPromptEmbeds,
        numImagesPerPrompt: call.numImagesPerPrompt, maxSequenceLength: call.maxSequenceLength,
      });
      owned.push(positive.promptEmbeds, positive.pooledPromptEmbeds, positive.textIds);
      const batch = positive.promptEmbeds.shape[0]!;
      let negative: FluxPromptEmbeds | undefined;
      if (call.trueCfg) {
        const prompts = batch / call.numImagesPerPrompt;
        const negativePrompt = promptList(what, 'negativePrompt', o.negativePrompt);
        const negativePrompt2 = promptList(what, 'negativePrompt2', o.negativePrompt2);
        negative = await this.encodePrompt({
          prompt: negativePrompt && promptsFor(what, 'negativePrompt', negativePrompt, prompts),
          prompt2: negativePrompt2 && promptsFor(what, 'negativePrompt2', negativePrompt2, prompts),
          promptEmbeds: o.negativePromptEmbeds, pooledPromptEmbeds: o.negativePooledPromptEmbeds,
          numImagesPerPrompt: call.numImagesPerPrompt, maxSequenceLength: call.maxSequenceLength,
        });
        owned.push(negative.promptEmbeds, negative.pooledPromptEmbeds, negative.textIds);
        const [p, q] = [positive.promptEmbeds.shape, negative.promptEmbeds.shape];
        if (p.join() !== q.join()) throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: the negative prompt embeddings are [${q.join(', ')}] but the prompt's [${p.join(', ')}]; they must be the same shape`);
      }
      await dt.sync();
      const encodedMs = performance.now();

      // 2. the initial latents, packed, and their position ids
      const { latents, userLatents, imageIds, rows, cols } = this.#prepareLatents(what, batch, call.height, call.width, o.seed, o.latents);
      if (!userLatents) owned.push(latents);
      owned.push(imageIds);

      // 3. the schedule: diffusers' sigmas, shifted by mu from the number of image tokens
      const s = this.scheduler.config;
      const mu = calculateShift(rows * cols, s.baseImageSeqLen, s.maxImageSeqLen, s.baseShift ?? 0.5, s.maxShift ?? 1.15);
      this.scheduler.setTimesteps(call.steps, { sigmas: call.sigmas ?? linspace(1.0, 1 / call.steps, call.steps), mu });
      this.scheduler.setBeginIndex(0);
      const placements = batchPlacements(this.mesh);
      const guidance = this.transformer.config.guidanceEmbeds ? dt.full([batch], call.guidanceScale, { dtype: 'float32', mesh: this.mesh, placements }) : undefined;
      if (guidance) owned.push(guidance);

      // 4. the denoising loop (with true CFG on a mesh with a 'cfg' dim and no 'dp', the two
      // branches run side by side: CFG parallel)
      const names = this.mesh.dimNames ?? [];
      const cfgParallel = negative !== undefined && names.includes('cfg') && !names.includes('dp');
      if (names.includes('cfg') && !cfgParallel) {
        log.warn(`${what}: the mesh dim 'cfg' splits true CFG's two branches (trueCfgScale > 1 with a negative prompt, on a mesh without 'dp'); ${negative ? "with 'dp'" : 'without them'} the work is repeated on it`);
      }
      // CFG parallel: the branches' embeddings batched [negative; positive] once, for every step
      const both = (a: dt.Tensor, b: dt.Tensor) => dt.cat([a, b], 0);
      const joint: FluxPromptEmbeds | undefined =
        cfgParallel && negative ? { promptEmbeds: both(negative.promptEmbeds, positive.promptEmbeds), pooledPromptEmbeds: both(negative.pooledPromptEmbeds, positive.pooledPromptEmbeds), textIds: positive.textIds } : undefined;
      const jointGuidance = joint && guidance ? both(guidance, guidance) : undefined;
      if (joint) owned.push(joint.promptEmbeds, joint.pooledPromptEmbeds, ...(jointGuidance ? [jointGuidance] : []));
      const velocity = (x: dt.Tensor, timestep: dt.Tensor, embeds: FluxPromptEmbeds, g = guidance) =>
        this.transformer.forward(x, {
          encoderHiddenStates: embeds.promptEmbeds, pooledProjections: embeds.pooledPromptEmbeds, timestep, guidance: g, imgIds: imageIds, txtIds: embeds.textIds,
        });
      // the guided velocity at `x`
      const predict = (x: dt.Tensor, timestep: dt.Tensor): dt.Tensor => {
        if (joint) {
          // both branches in one call, its batch split over 'cfg' by the transformer's plan;
          // gathered for the guidance step
          const out = velocity(both(x, x), both(timestep, timestep), joint, jointGuidance);
          const [unconditional, conditional] = out.redistribute(out.placements.map(() => dt.Replicate())).split([batch, batch], 0) as [dt.Tensor, dt.Tensor];
          return unconditional.add(conditional.sub(unconditional).mul(call.trueCfgScale));
        }
        const conditional = velocity(x, timestep, positive);
        if (!negative) return conditional;
        const unconditional = velocity(x, timestep, negative);
        return unconditional.add(conditional.sub(unconditional).mul(call.trueCfgScale));
      };
      const final = await denoise({
        timesteps: this.scheduler.timesteps,
        latents,
        keepFirst: userLatents,
        startMs,
        onStep: o.onStep,
        step: (x, t) => {
          // as diffusers: t.expand(batch).to(latents.dtype) / 1000; the value travels as data,
          // not as an op attribute, so that every step records the same ops (and replays them)
          const timestep = dt.tensor(new Array<number>(batch).fill(t), { dtype: x.dtype, mesh: this.mesh, placements }).div(1000);
          // the model's part of the step is cut off from the scheduler's, whose sigmas differ per step
          const prediction = dt.graph.step(() => predict(x, timestep));
          return this.scheduler.step(prediction, t, x).prevSample;
        },
      });
      await dt.sync();
      const denoisedMs = performance.now();
      if (call.outputType === 'latent') {
        return { images: final, timings: { encodeMs: encodedMs - startMs, denoiseMs: denoisedMs - encodedMs, decodeMs: 0 } };
      }

      // 5. decoding
      owned.push(final);
      const decoded = this.decode(final, rows * 2, cols * 2);
      const images = await imageOutput(decoded, call.outputType);
      await dt.sync();
      return { images, timings: { encodeMs: encodedMs - startMs, denoiseMs: denoisedMs - encodedMs, decodeMs: performance.now() - denoisedMs } };
    } finally {
      dt.dispose(owned);
      this.transformer.releaseCallCache(); // the tables of this call's ids
    }
  }

  /** Packed latents [B, tokens, C·4] of a latentHeight x latentWidth grid to the VAE's images [B, 3, H, W] in [-1, 1]. */
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
      return dt.tidy(() => vae.decode(latents));
    } finally {
      latents.dispose();
    }
  }

  override dispose(): void {
    this.releaseTextEncoders();
    this.transformer.dispose();
    this.vae.dispose();
    super.dispose();
  }

  // generate()'s numbers checked, with diffusers' defaults, before anything runs
  #checkCall(what: string, o: Partial<FluxGenerateOptions>): FluxCall {
    const prompt = promptList(what, 'prompt', o.prompt);
    promptList(what, 'prompt2', o.prompt2);
    if (prompt === undefined && o.promptEmbeds === undefined) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give prompt, or promptEmbeds and pooledPromptEmbeds`);
    if ((o.negativePrompt !== undefined || o.negativePrompt2 !== undefined) && o.negativePromptEmbeds !== undefined) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give negativePrompt (and negativePrompt2) or negativePromptEmbeds, not both`);
    }
    if (o.negativePromptEmbeds !== undefined && o.negativePooledPromptEmbeds === undefined) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: negativePromptEmbeds needs negativePooledPromptEmbeds too`);
    }
    const negative = promptList(what, 'negativePrompt', o.negativePrompt);
    promptList(what, 'negativePrompt2', o.negativePrompt2);
    const sample = this.defaultSampleSize * this.vaeScaleFactor;
    const { height, width } = checkImageSize(what, o.height ?? sample, o.width ?? sample, this.vaeScaleFactor * 2);
    const steps = this.scheduler.checkSteps(`${what} numInferenceSteps`, o.numInferenceSteps ?? 28);
    let sigmas: number[] | undefined;
    if (o.sigmas !== undefined) {
      if (!Array.isArray(o.sigmas) || o.sigmas.length !== steps || !o.sigmas.every((x) => typeof x === 'number' && Number.isFinite(x))) {
        throw invalidParameter(`${what} sigmas`, `an array of ${steps} finite numbers (one per step)`, o.sigmas);
      }
      sigmas = [...o.sigmas];
    }
    const guidanceScale = checkScale(`${what} guidanceScale`, o.guidanceScale ?? 3.5);
    if (o.guidanceScale !== undefined && !this.transformer.config.guidanceEmbeds) {
      log.warn(`${what}: guidanceScale is not used: this transformer has no guidance embedding (guidance_embeds false, as FLUX.1-schnell); for classifier-free guidance give trueCfgScale and a negative prompt`);
    }
    const trueCfgScale = checkScale(`${what} trueCfgScale`, o.trueCfgScale ?? 1.0);
    const hasNegative = negative !== undefined || (o.negativePromptEmbeds !== undefined && o.negativePooledPromptEmbeds !== undefined);
    const trueCfg = trueCfgScale > 1 && hasNegative;
    if (hasNegative && !trueCfg) log.warn(`${what}: the negative prompt is not used: true classifier-free guidance needs trueCfgScale > 1 (it is ${trueCfgScale})`);
    if (trueCfgScale > 1 && !hasNegative) log.warn(`${what}: trueCfgScale ${trueCfgScale} is not used: true classifier-free guidance needs a negative prompt (negativePrompt or negativePromptEmbeds)`);
    const outputType: OutputType = o.outputType ?? 'png';
    const numImagesPerPrompt = imagesPerPrompt(what, o.numImagesPerPrompt);
    const prompts = prompt?.length ?? (o.promptEmbeds instanceof dt.Tensor ? o.promptEmbeds.shape[0]! : 1);
    checkDpDivides(what, this.mesh, prompts * numImagesPerPrompt, `${prompts} prompt${prompts === 1 ? '' : 's'} x ${numImagesPerPrompt} image${numImagesPerPrompt === 1 ? '' : 's'}`);
    const maxSequenceLength = this.#maxSequenceLength(what, o.maxSequenceLength);
    const textTokens = o.promptEmbeds instanceof dt.Tensor ? o.promptEmbeds.shape[1]! : maxSequenceLength;
    this.#checkMemory(what, prompts * numImagesPerPrompt, height, width, textTokens, outputType);
    return { height, width, steps, sigmas, guidanceScale, trueCfgScale, trueCfg, outputType, numImagesPerPrompt, maxSequenceLength };
  }

  // the call's memory floor (memory_floor.ts)
  #checkMemory(what: string, batch: number, height: number, width: number, textTokens: number, outputType: OutputType): void {
    const t = this.transformer.config;
    const [latentHeight, latentWidth] = [2 * Math.floor(height / (this.vaeScaleFactor * 2)), 2 * Math.floor(width / (this.vaeScaleFactor * 2))];
    const phases = generatePhases({
      images: batch, rows: batch, latents: [batch, t.inChannels / 4, latentHeight, latentWidth], imageTokens: (latentHeight / 2) * (latentWidth / 2), textTokens,
      textWidth: t.jointAttentionDim, width: t.innerDim, dtype: this.dtype, imageHeight: height, imageWidth: width,
      decoder: outputType === 'latent' ? undefined : { channels: this.vae.config.blockOutChannels[0]!, dtype: this.vae.dtype },
    });
    checkMemoryFloor(what, [this.mesh, this.vae.mesh], phases, 'lower height and width, or numImagesPerPrompt');
  }

  #maxSequenceLength(what: string, value: unknown): number {
    if (value === undefined) return MAX_SEQUENCE_LENGTH;
    if (typeof value === 'number' && Number.isInteger(value) && value > MAX_SEQUENCE_LENGTH) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: maxSequenceLength cannot be greater than ${MAX_SEQUENCE_LENGTH} but is ${value} (as in diffusers)`);
    }
    return checkInteger(`${what} maxSequenceLength`, value, 1, MAX_SEQUENCE_LENGTH);
  }

  #checkEmbeds(what: string, name: string, value: unknown, ndim: number): dt.Tensor {
    const t = tensorOption(what, name, value, ndim);
    const c = this.transformer.config;
    const width = ndim === 3 ? c.jointAttentionDim : c.pooledProjectionDim;
    if (t.shape[ndim - 1] !== width) {
      const key = ndim === 3 ? 'joint_attention_dim' : 'pooled_projection_dim';
      throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: ${name} must end in the transformer's ${key} (${width}), got ${t.describe()}`);
    }
    return t;
  }

  // diffusers' prepare_latents: noise [B, C, h, w] from the seed (h, w: the latent size, even), packed
  #prepareLatents(what: string, batch: number, height: number, width: number, seed: unknown, given: unknown) {
    const latentHeight = 2 * Math.floor(height / (this.vaeScaleFactor * 2));
    const latentWidth = 2 * Math.floor(width / (this.vaeScaleFactor * 2));
    const [rows, cols] = [latentHeight / 2, latentWidth / 2];
    const features = this.transformer.config.inChannels;
    let latents: dt.Tensor;
    let userLatents = false;
    if (given !== undefined) {
      if (seed !== undefined) log.warn(`${what}: seed is not used: latents are given`);
      const t = tensorOption(what, 'latents', given, 3);
      if (t.shape.join() !== [batch, rows * cols, features].join()) {
        throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: latents must be packed [${batch}, ${rows * cols}, ${features}] (batch, (height/16)·(width/16) tokens, 4 x latent channels), got ${t.describe()}`);
      }
      latents = dt.tidy(() => (t.dtype === this.dtype ? t : t.to(this.dtype)).redistribute(this.mesh, batchPlacements(this.mesh)));
      userLatents = latents === t;
    } else {
      const noise = initialLatents(what, [batch, features / 4, latentHeight, latentWidth], seed, this.mesh, this.dtype);
      latents = packLatents(noise);
      noise.dispose();
    }
    const imageIds = latentImageIds(rows, cols, this.mesh, this.dtype);
    return { latents, userLatents, imageIds, rows, cols };
  }
}

// the transformer's mesh and the text encoders' (default the same)
function meshesOf(what: string, o: Partial<PipelineOptions>): { mesh: dt.DeviceMesh; textEncoderMesh: dt.DeviceMesh } {
  if (o.mesh !== undefined && !(o.mesh instanceof dt.DeviceMesh)) throw invalidParameter(`${what} mesh`, 'DeviceMesh', o.mesh);
  if (o.textEncoderMesh !== undefined && !(o.textEncoderMesh instanceof dt.DeviceMesh)) throw invalidParameter(`${what} textEncoderMesh`, 'DeviceMesh', o.textEncoderMesh);
  const mesh = o.mesh ?? dt.defaultMesh();
  return { mesh, textEncoderMesh: o.textEncoderMesh ?? mesh };
}
