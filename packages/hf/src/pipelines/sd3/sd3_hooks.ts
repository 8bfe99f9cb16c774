// StableDiffusion3Pipeline's part of the lifecycle (pipeline_lifecycle.ts), as diffusers'
// StableDiffusion3Pipeline __call__: its inputs and defaults (28 steps, guidance 7.0, 256 T5
// tokens), the prompts through sd3_prompt.ts, the transformer's text inputs [negative; positive]
// with guidance (split over 'cfg', then 'dp'; only 'dp' without), the schedule (dynamic shift
// from the image size for a scheduler that asks), latents drawn in diffusers' shape and kept
// whole on every device between steps, the prediction gathered after each call, and decoding.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkFinite, checkInteger, invalidParameter } from '@dtorch/common';
import { batchPlacementsOver } from '../../parallel/batch.js';
import { calculateShift } from '../../schedulers/calculate_shift.js';
import { GUIDANCE_BATCH_DIMS, chooseGuidance, type GuidedInputs } from '../guidance.js';
import type { GenerateSizes } from '../memory_floor.js';
import type { CallSettings, PipelineHooks, StartLatents } from '../pipeline_lifecycle.js';
import { checkGenerateOptions, checkImageSize, checkScale, imagesPerPrompt, promptList, tensorOption } from '../pipeline_inputs.js';
import type { SD3GenerateOptions, StableDiffusion3Pipeline } from './sd3_pipeline.js';
import { encodeSD3Prompt, promptTargetOf, textEncodersOf, type SD3PromptEmbeds } from './sd3_prompt.js';

/** An SD3 generate() call's settings, checked, with diffusers' defaults. */
export interface SD3Call extends CallSettings {
  /** The call, for messages ('StableDiffusion3Pipeline.generate'). */
  readonly what: string;
  /** The options as given (prompts, embeddings, latents, seed, sigmas, mu). */
  readonly options: Partial<SD3GenerateOptions>;
  readonly height: number;
  readonly width: number;
  /** Undefined with custom sigmas (their number). */
  readonly numInferenceSteps: number | undefined;
  readonly numImagesPerPrompt: number;
  readonly maxSequenceLength: number;
  /** Images in the batch. */
  readonly batch: number;
}

/** The transformer's text inputs: the prompt's hidden states and pooled projections (both branches' with guidance). */
export interface SD3Text {
  /** [rows, tokens, joint_attention_dim]. */
  readonly context: dt.Tensor;
  /** [rows, pooled_projection_dim]. */
  readonly pooled: dt.Tensor;
}

/** The options StableDiffusion3Pipeline.generate takes. */
export const SD3_GENERATE_OPTIONS = [
  'prompt', 'prompt2', 'prompt3', 'negativePrompt', 'negativePrompt2', 'negativePrompt3', 'height', 'width',
  'numInferenceSteps', 'guidanceScale', 'seed', 'numImagesPerPrompt', 'maxSequenceLength', 'latents',
  'promptEmbeds', 'pooledPromptEmbeds', 'negativePromptEmbeds', 'negativePooledPromptEmbeds', 'outputType', 'onStep', 'signal', 'loraScale',
  'clipSkip', 'sigmas', 'mu',
] as const;
const IMAGE_BATCH_DIMS = ['dp'] as const;
const EMBEDS = ['promptEmbeds', 'pooledPromptEmbeds', 'negativePromptEmbeds', 'negativePooledPromptEmbeds'] as const;

/** The defaults of an SD3 call that differ between pipelines (image-to-image runs 50 steps). */
export interface SD3CallDefaults {
  readonly numInferenceSteps: number;
}

/** SD3's hooks of the lifecycle. */
export const sd3Hooks: PipelineHooks<StableDiffusion3Pipeline, SD3Call, SD3PromptEmbeds, SD3Text, StartLatents> = {
  checkInputs(pipe, what, options) {
    return checkSD3Call(pipe, what, options, SD3_GENERATE_OPTIONS, { numInferenceSteps: 28 });
  },

  // the guidance branches batched
  memorySizes(pipe, call) {
    const t = pipe.transformer.config;
    const [latentHeight, latentWidth] = [Math.floor(call.height / pipe.vaeScaleFactor), Math.floor(call.width / pipe.vaeScaleFactor)];
    const clipTokens = pipe.tokenizer.modelMaxLength > 1e6 ? 77 : pipe.tokenizer.modelMaxLength;
    const { promptEmbeds } = call.options;
    return {
      images: call.batch, rows: call.guidance.branches === 'off' ? call.batch : 2 * call.batch, latents: [call.batch, t.inChannels, latentHeight, latentWidth],
      imageTokens: Math.floor(latentHeight / pipe.patchSize) * Math.floor(latentWidth / pipe.patchSize), textTokens: promptEmbeds ? promptEmbeds.shape[1]! : clipTokens + call.maxSequenceLength,
      textWidth: t.jointAttentionDim, width: t.captionProjectionDim, dtype: pipe.transformer.proj_out.weight.dtype, imageHeight: call.height, imageWidth: call.width,
      decoder: call.outputType === 'latent' ? undefined : { channels: pipe.vae.config.blockOutChannels[0]!, dtype: pipe.vae.dtype },
    } satisfies GenerateSizes;
  },

  // diffusers' encode_prompt (sd3_prompt.ts)
  encodePrompt(pipe, call) {
    return encodeSD3Prompt(call.what, textEncodersOf(pipe), promptTargetOf(pipe), {
      ...pick(call.options, ['prompt', 'prompt2', 'prompt3', 'negativePrompt', 'negativePrompt2', 'negativePrompt3', 'clipSkip', ...EMBEDS]),
      numImagesPerPrompt: call.numImagesPerPrompt,
      maxSequenceLength: call.maxSequenceLength,
      doClassifierFreeGuidance: call.guidance.branches !== 'off',
    });
  },

  // the transformer's prompt inputs: [negative; positive] with guidance, the batch split over
  // 'cfg' and 'dp' (only 'dp' without guidance), in its dtype; the encoded embeddings freed at
  // once (the caller's left alone)
  textInputs(pipe, call, embeds, owned): GuidedInputs<SD3Text> {
    const cfg = call.guidance.branches !== 'off';
    const text = dt.tidy(() => {
      const whole = (t: dt.Tensor) => toMesh(pipe, t);
      const stack = (neg: dt.Tensor | undefined, pos: dt.Tensor) => {
        const t = whole(cfg ? dt.cat([whole(neg!), whole(pos)], 0) : whole(pos));
        return t.redistribute(batchPlacementsOver(pipe.mesh, t.shape[0]!, cfg ? GUIDANCE_BATCH_DIMS : IMAGE_BATCH_DIMS));
      };
      const dtype = pipe.transformer.proj_out.weight.dtype;
      return { context: stack(embeds.negativePromptEmbeds, embeds.promptEmbeds).to(dtype), pooled: stack(embeds.negativePooledPromptEmbeds, embeds.pooledPromptEmbeds).to(dtype) };
    });
    const given = new Set(EMBEDS.map((k) => call.options[k]));
    for (const t of Object.values(embeds) as (dt.Tensor | undefined)[]) if (t && !given.has(t)) t.dispose();
    owned.push(text.context, text.pooled);
    return cfg ? { batched: text } : { positive: text };
  },

  // the dynamic shift, for a scheduler that asks, from the image's tokens
  setTimesteps(pipe, call) {
    const { sigmas, mu } = call.options;
    const s = pipe.scheduler.config;
    let shift = mu;
    if (s.useDynamicShifting && shift === undefined) {
      const [p, f] = [pipe.patchSize, pipe.vaeScaleFactor];
      const tokens = Math.floor(Math.floor(call.height / f) / p) * Math.floor(Math.floor(call.width / f) / p);
      shift = calculateShift(tokens, s.baseImageSeqLen, s.maxImageSeqLen, s.baseShift ?? 0.5, s.maxShift ?? 1.16);
    }
    pipe.scheduler.setTimesteps(sigmas ? null : call.numInferenceSteps, { ...(sigmas ? { sigmas } : {}), ...(shift === undefined ? {} : { mu: shift }) });
    return pipe.scheduler.timesteps;
  },

  prepareLatents(pipe, call) {
    const { seed, latents } = call.options;
    const start = pipe.prepareLatents(call.batch, call.height, call.width, pipe.transformer.proj_out.weight.dtype, seed, latents);
    return { latents: start, given: start === latents };
  },

  // the prediction for x split as the text inputs are, gathered: the latents stay whole
  predict(pipe, x, t, text) {
    const input = x.redistribute(text.context.placements);
    // the model's part of the step is cut off from the scheduler's, whose sigmas differ per step
    const prediction = dt.graph.step(() => pipe.transformer.forward(input, { encoderHiddenStates: text.context, pooledProjections: text.pooled, timestep: t }));
    return prediction.redistribute(prediction.placements.map(() => dt.Replicate()));
  },

  decode(pipe, latents) {
    return pipe.decode(latents);
  },
};

/** How an SD3 variant's input pictures are preprocessed (diffusers' VaeImageProcessor with the VAE's scale factor) and which tensors pass as latents. */
export function sd3ImageProcessor(pipe: StableDiffusion3Pipeline): { vaeScaleFactor: number; latentChannels: number } {
  return { vaeScaleFactor: pipe.vaeScaleFactor, latentChannels: pipe.vae.config.latentChannels };
}

/**
 * diffusers' check_inputs and defaults for an SD3 call (the option names in `known`), each error
 * at the call; a variant checks its own options and passes the rest here.
 */
export function checkSD3Call(pipe: StableDiffusion3Pipeline, what: string, options: unknown, known: readonly string[], defaults: SD3CallDefaults): SD3Call {
  if (options && typeof options === 'object' && 'trueCfgScale' in options) {
    throw new DTorchError(ErrorCode.InvalidArgument, `${what}: trueCfgScale is FluxPipeline's; Stable Diffusion 3 guides with guidanceScale (classifier-free guidance when > 1)`);
  }
  const o = checkGenerateOptions<SD3GenerateOptions>(what, options, known);
  const sample = pipe.defaultSampleSize * pipe.vaeScaleFactor;
  const { height, width } = checkImageSize(what, o.height ?? sample, o.width ?? sample, pipe.vaeScaleFactor * pipe.patchSize);
  // the transformer's position table covers pos_embed_max_size patches a side
  const c = pipe.transformer.config;
  const largest = c.posEmbedMaxSize * pipe.patchSize * pipe.vaeScaleFactor;
  if (height > largest || width > largest) {
    throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${width}x${height} (width x height) is larger than this model takes: at most ${largest} a side (pos_embed_max_size ${c.posEmbedMaxSize} x patch ${pipe.patchSize} x VAE scale ${pipe.vaeScaleFactor})`);
  }
  const numInferenceSteps = o.sigmas ? undefined : pipe.scheduler.checkSteps(`${what} numInferenceSteps`, o.numInferenceSteps ?? defaults.numInferenceSteps);
  const guidanceScale = checkScale(`${what} guidanceScale`, o.guidanceScale ?? 7.0);
  const numImagesPerPrompt = imagesPerPrompt(what, o.numImagesPerPrompt);
  const maxSequenceLength = o.maxSequenceLength ?? 256;
  if (!Number.isInteger(maxSequenceLength) || maxSequenceLength < 1 || maxSequenceLength > 512) {
    throw new DTorchError(ErrorCode.InvalidArgument, `${what}: maxSequenceLength cannot be greater than 512 (nor less than 1) but is ${maxSequenceLength}`);
  }
  if (o.seed !== undefined) checkInteger(`${what} seed`, o.seed, 0, 2 ** 48 - 1);
  if (o.sigmas !== undefined && (!Array.isArray(o.sigmas) || o.sigmas.length === 0)) throw invalidParameter(`${what} sigmas`, 'a non-empty array of numbers', o.sigmas);
  if (o.mu !== undefined) checkFinite(`${what} mu`, o.mu);
  const cfg = guidanceScale > 1;
  // prompts or their embeddings, not both
  for (const [text, embeds] of [['prompt', 'promptEmbeds'], ['prompt2', 'promptEmbeds'], ['prompt3', 'promptEmbeds'], ['negativePrompt', 'negativePromptEmbeds'], ['negativePrompt2', 'negativePromptEmbeds'], ['negativePrompt3', 'negativePromptEmbeds']] as const) {
    if (o[text] !== undefined && o[embeds] !== undefined) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give ${text} or ${embeds}, not both`);
  }
  if (o.prompt === undefined && o.promptEmbeds === undefined) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give prompt or promptEmbeds`);
  for (const [embeds, pooled] of [['promptEmbeds', 'pooledPromptEmbeds'], ['negativePromptEmbeds', 'negativePooledPromptEmbeds']] as const) {
    if (o[embeds] === undefined) continue;
    tensorOption(what, embeds, o[embeds], 3);
    if (o[pooled] === undefined) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: with ${embeds} give ${pooled} too (from the same text encoders)`);
    tensorOption(what, pooled, o[pooled], 2);
  }
  let batch: number;
  if (o.promptEmbeds) {
    const [e, p] = [o.promptEmbeds, o.pooledPromptEmbeds!];
    if (e.ndim !== 3 || e.shape[2] !== c.jointAttentionDim || p.ndim !== 2 || p.shape[0] !== e.shape[0] || p.shape[1] !== c.pooledProjectionDim) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: promptEmbeds must be [batch, tokens, ${c.jointAttentionDim}] and pooledPromptEmbeds [batch, ${c.pooledProjectionDim}], got ${e.describe()} and ${p.describe()}`);
    }
    if (o.negativePromptEmbeds && (o.negativePromptEmbeds.shape.join() !== e.shape.join() || o.negativePooledPromptEmbeds!.shape.join() !== p.shape.join())) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: negativePromptEmbeds and negativePooledPromptEmbeds must have the shapes of promptEmbeds and pooledPromptEmbeds, got ${o.negativePromptEmbeds.describe()} and ${o.negativePooledPromptEmbeds!.describe()}`);
    }
    if (numImagesPerPrompt !== 1) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: numImagesPerPrompt is for prompts; give promptEmbeds one row per image`);
    batch = e.shape[0]!;
  } else {
    batch = promptList(what, 'prompt', o.prompt)!.length * numImagesPerPrompt;
  }
  if (cfg && o.promptEmbeds && !o.negativePromptEmbeds && !textEncodersOf(pipe)) {
    throw new DTorchError(ErrorCode.InvalidArgument, `${what}: guidanceScale ${guidanceScale} > 1 needs the negative prompt's embeddings; the text encoders were released, so pass negativePromptEmbeds and negativePooledPromptEmbeds`);
  }
  const guidance = chooseGuidance(what, pipe.mesh, { scale: guidanceScale, on: cfg, batched: true, latentsSplitOverDp: false, describe: "classifier-free guidance's two branches (guidanceScale > 1)" });
  return {
    what, options: o, height, width, numInferenceSteps, numImagesPerPrompt, maxSequenceLength, batch, guidance,
    outputType: o.outputType ?? 'png', onStep: o.onStep, signal: o.signal, loraScale: o.loraScale,
  };
}

// `t` whole on every device of the pipeline's mesh
function toMesh(pipe: StableDiffusion3Pipeline, t: dt.Tensor): dt.Tensor {
  const whole = pipe.mesh.shape.map(() => dt.Replicate());
  return t.mesh.equals(pipe.mesh) ? t.redistribute(whole) : t.redistribute(pipe.mesh, whole);
}

function pick<T extends object, K extends keyof T>(o: T, keys: readonly K[]): Pick<T, K> {
  return Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]])) as Pick<T, K>;
}
