// FluxPipeline's part of the lifecycle (pipeline_lifecycle.ts), as diffusers' FluxPipeline
// __call__: its inputs and defaults (28 steps, guidance 3.5 embedded for guidance-distilled
// models, 512 T5 tokens, true CFG when trueCfgScale > 1 with a negative prompt), the prompts
// through encodePrompt, sigmas linspace(1, 1/steps) shifted by `mu` from the image's token
// count, noise drawn in diffusers' shape and packed into 2x2 patches with the tokens' position
// ids, the transformer's velocity at timestep / 1000, and the packed latents unpacked and decoded.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, invalidParameter, log } from '@dtorch/common';
import { batchPlacements } from '../../parallel/batch.js';
import { calculateShift } from '../../schedulers/calculate_shift.js';
import { linspace } from '../../schedulers/sigma_math.js';
import type { GenerateSizes } from '../memory_floor.js';
import { chooseGuidance, type GuidedInputs } from '../guidance.js';
import type { CallSettings, PipelineHooks, StartLatents } from '../pipeline_lifecycle.js';
import {
  checkDpDivides, checkGenerateOptions, checkImageSize, checkScale, imagesPerPrompt, initialLatents, promptList, promptsFor, tensorOption,
} from '../pipeline_inputs.js';
import type { FluxGenerateOptions, FluxPipeline } from './flux_pipeline.js';
import { checkMaxSequenceLength, type FluxPromptEmbeds } from './flux_prompt.js';
import { latentImageIds, packLatents } from './flux_latents.js';

/** A Flux generate() call's settings, checked, with diffusers' defaults. */
export interface FluxCall extends CallSettings {
  /** The call, for messages ('FluxPipeline.generate'). */
  readonly what: string;
  /** The options as given (prompts, embeddings, latents, seed). */
  readonly options: Partial<FluxGenerateOptions>;
  readonly height: number;
  readonly width: number;
  readonly steps: number;
  readonly sigmas: number[] | undefined;
  /** The embedded guidance of guidance-distilled models. */
  readonly guidanceScale: number;
  readonly numImagesPerPrompt: number;
  readonly maxSequenceLength: number;
  /** Images in the batch: prompts × numImagesPerPrompt. */
  readonly batch: number;
}

/** The prompt's embeddings, and the negative prompt's with true CFG. */
export interface FluxEncoded {
  /** The prompt's. */
  readonly positive: FluxPromptEmbeds;
  /** The negative prompt's, with true CFG. */
  readonly negative?: FluxPromptEmbeds;
}

/** The transformer's text inputs of one guidance branch: the prompt's embeddings, and the guidance embedding's value per row. */
export interface FluxText extends FluxPromptEmbeds {
  /** [rows] float32 guidanceScale (guidance_embeds models only). */
  guidance: dt.Tensor | undefined;
}

/** The packed latents and what goes beside them: the image tokens' ids, the grid of 2x2 patches. */
export interface FluxStart extends StartLatents {
  /** [rows · cols, 3]: (0, row, col) per token. */
  readonly imageIds: dt.Tensor;
  /** The grid's rows of 2x2 patches (latent height / 2). */
  readonly rows: number;
  /** Its columns (latent width / 2). */
  readonly cols: number;
}

/** The options FluxPipeline.generate takes. */
export const FLUX_GENERATE_OPTIONS = [
  'prompt', 'prompt2', 'negativePrompt', 'negativePrompt2', 'height', 'width', 'numInferenceSteps', 'sigmas', 'guidanceScale', 'trueCfgScale',
  'seed', 'numImagesPerPrompt', 'maxSequenceLength', 'latents', 'promptEmbeds', 'pooledPromptEmbeds', 'negativePromptEmbeds',
  'negativePooledPromptEmbeds', 'outputType', 'onStep', 'signal', 'loraScale',
] as const;

/** The defaults of a Flux call that differ between pipelines (image-to-image guides at 7.0, Fill at 30 over 50 steps). */
export interface FluxCallDefaults {
  readonly guidanceScale: number;
  /** Default 28. */
  readonly numInferenceSteps?: number;
}

/** Flux's hooks of the lifecycle. */
export const fluxHooks: PipelineHooks<FluxPipeline, FluxCall, FluxEncoded, FluxText, FluxStart> = {
  checkInputs(pipe, what, options) {
    return checkFluxCall(pipe, what, options, FLUX_GENERATE_OPTIONS, { guidanceScale: 3.5 });
  },

  memorySizes(pipe, call) {
    const t = pipe.transformer.config;
    const [latentHeight, latentWidth] = latentSize(pipe, call);
    const textTokens = call.options.promptEmbeds instanceof dt.Tensor ? call.options.promptEmbeds.shape[1]! : call.maxSequenceLength;
    return {
      images: call.batch, rows: call.batch, latents: [call.batch, t.outChannels / 4, latentHeight, latentWidth], imageTokens: (latentHeight / 2) * (latentWidth / 2), textTokens,
      textWidth: t.jointAttentionDim, width: t.innerDim, dtype: pipe.dtype, imageHeight: call.height, imageWidth: call.width,
      decoder: call.outputType === 'latent' ? undefined : { channels: pipe.vae.config.blockOutChannels[0]!, dtype: pipe.vae.dtype },
    } satisfies GenerateSizes;
  },

  // the prompts, and with true CFG the negative prompts, through encodePrompt
  async encodePrompt(pipe, call, owned) {
    const { what, options: o } = call;
    const encode = async (prompt: unknown, prompt2: unknown, promptEmbeds: dt.Tensor | undefined, pooledPromptEmbeds: dt.Tensor | undefined) => {
      const e = await pipe.encodePrompt({
        prompt: prompt as string[] | undefined, prompt2: prompt2 as string[] | undefined, promptEmbeds, pooledPromptEmbeds,
        numImagesPerPrompt: call.numImagesPerPrompt, maxSequenceLength: call.maxSequenceLength,
      });
      owned.push(e.promptEmbeds, e.pooledPromptEmbeds, e.textIds);
      return e;
    };
    const positive = await encode(o.prompt, o.prompt2, o.promptEmbeds, o.pooledPromptEmbeds);
    if (call.guidance.branches === 'off') return { positive };
    const prompts = positive.promptEmbeds.shape[0]! / call.numImagesPerPrompt;
    const negativePrompt = promptList(what, 'negativePrompt', o.negativePrompt);
    const negativePrompt2 = promptList(what, 'negativePrompt2', o.negativePrompt2);
    const negative = await encode(
      negativePrompt && promptsFor(what, 'negativePrompt', negativePrompt, prompts),
      negativePrompt2 && promptsFor(what, 'negativePrompt2', negativePrompt2, prompts),
      o.negativePromptEmbeds, o.negativePooledPromptEmbeds,
    );
    const [p, q] = [positive.promptEmbeds.shape, negative.promptEmbeds.shape];
    if (p.join() !== q.join()) throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: the negative prompt embeddings are [${q.join(', ')}] but the prompt's [${p.join(', ')}]; they must be the same shape`);
    return { positive, negative };
  },

  // the guidance embedding's value per row beside the embeddings; with guidance batched, the
  // branches joined [negative; positive] once for every step
  textInputs(pipe, call, { positive, negative }, owned): GuidedInputs<FluxText> {
    const rows = positive.promptEmbeds.shape[0]!;
    const guidance = pipe.transformer.config.guidanceEmbeds
      ? dt.full([rows], call.guidanceScale, { dtype: 'float32', mesh: pipe.mesh, placements: batchPlacements(pipe.mesh) })
      : undefined;
    if (guidance) owned.push(guidance);
    if (!negative) return { positive: { ...positive, guidance } };
    if (call.guidance.branches === 'separate') return { positive: { ...positive, guidance }, negative: { ...negative, guidance } };
    // both branches in one call, its batch split over 'cfg' by the transformer's plan
    const both = (a: dt.Tensor, b: dt.Tensor) => dt.cat([a, b], 0);
    const batched: FluxText = {
      promptEmbeds: both(negative.promptEmbeds, positive.promptEmbeds),
      pooledPromptEmbeds: both(negative.pooledPromptEmbeds, positive.pooledPromptEmbeds),
      textIds: positive.textIds,
      guidance: guidance && both(guidance, guidance),
    };
    owned.push(batched.promptEmbeds, batched.pooledPromptEmbeds, ...(batched.guidance ? [batched.guidance] : []));
    return { batched };
  },

  // diffusers' sigmas, shifted by mu from the number of image tokens
  setTimesteps(pipe, call) {
    const s = pipe.scheduler.config;
    const [latentHeight, latentWidth] = latentSize(pipe, call);
    const mu = calculateShift((latentHeight / 2) * (latentWidth / 2), s.baseImageSeqLen, s.maxImageSeqLen, s.baseShift ?? 0.5, s.maxShift ?? 1.15);
    pipe.scheduler.setTimesteps(call.steps, { sigmas: call.sigmas ?? linspace(1.0, 1 / call.steps, call.steps), mu });
    pipe.scheduler.setBeginIndex(0);
    return pipe.scheduler.timesteps;
  },

  // diffusers' prepare_latents: noise [B, C, h, w] from the seed (h, w: the latent size, even), packed
  prepareLatents(pipe, call, _timesteps, owned) {
    const { what } = call;
    const [latentHeight, latentWidth] = latentSize(pipe, call);
    const [rows, cols] = [latentHeight / 2, latentWidth / 2];
    const features = pipe.transformer.config.outChannels; // the latents' (FLUX.1-Fill takes more in)
    const { seed, latents: given } = call.options;
    let latents: dt.Tensor;
    let isGiven = false;
    if (given !== undefined) {
      if (seed !== undefined) log.warn(`${what}: seed is not used: latents are given`);
      const t = tensorOption(what, 'latents', given, 3);
      if (t.shape.join() !== [call.batch, rows * cols, features].join()) {
        throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: latents must be packed [${call.batch}, ${rows * cols}, ${features}] (batch, (height/16)·(width/16) tokens, 4 x latent channels), got ${t.describe()}`);
      }
      latents = dt.tidy(() => (t.dtype === pipe.dtype ? t : t.to(pipe.dtype)).redistribute(pipe.mesh, batchPlacements(pipe.mesh)));
      isGiven = latents === t;
    } else {
      const noise = initialLatents(what, [call.batch, features / 4, latentHeight, latentWidth], seed, pipe.mesh, pipe.dtype);
      latents = packLatents(noise);
      noise.dispose();
    }
    const imageIds = latentImageIds(rows, cols, pipe.mesh, pipe.dtype);
    owned.push(imageIds);
    return { latents, given: isGiven, imageIds, rows, cols };
  },

  predict(pipe, x, t, text, start) {
    // as diffusers: t.expand(batch).to(latents.dtype) / 1000; the value travels as data, not as
    // an op attribute, so that every step records the same ops (and replays them)
    const timestep = dt.tensor(new Array<number>(x.shape[0]!).fill(t), { dtype: x.dtype, mesh: pipe.mesh, placements: batchPlacements(pipe.mesh) }).div(1000);
    // the model's part of the step is cut off from the scheduler's, whose sigmas differ per step
    return dt.graph.step(() =>
      pipe.transformer.forward(x, {
        encoderHiddenStates: text.promptEmbeds, pooledProjections: text.pooledPromptEmbeds, timestep, guidance: text.guidance, imgIds: start.imageIds, txtIds: text.textIds,
      }),
    );
  },

  decode(pipe, latents, _call, start) {
    return pipe.decode(latents, start.rows * 2, start.cols * 2);
  },

  // the tables of this call's ids
  finish(pipe) {
    pipe.transformer.releaseCallCache();
  },
};

/**
 * A Flux call's options checked (the names in `known`), diffusers' defaults filled in, the
 * guidance chosen; a variant checks its own options and passes the rest here.
 */
export function checkFluxCall(pipe: FluxPipeline, what: string, options: unknown, known: readonly string[], defaults: FluxCallDefaults): FluxCall {
  const o = checkGenerateOptions<FluxGenerateOptions>(what, options, known);
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
  const sample = pipe.defaultSampleSize * pipe.vaeScaleFactor;
  const { height, width } = checkImageSize(what, o.height ?? sample, o.width ?? sample, pipe.vaeScaleFactor * 2);
  const steps = pipe.scheduler.checkSteps(`${what} numInferenceSteps`, o.numInferenceSteps ?? defaults.numInferenceSteps ?? 28);
  let sigmas: number[] | undefined;
  if (o.sigmas !== undefined) {
    if (!Array.isArray(o.sigmas) || o.sigmas.length !== steps || !o.sigmas.every((x) => typeof x === 'number' && Number.isFinite(x))) {
      throw invalidParameter(`${what} sigmas`, `an array of ${steps} finite numbers (one per step)`, o.sigmas);
    }
    sigmas = [...o.sigmas];
  }
  const guidanceScale = checkScale(`${what} guidanceScale`, o.guidanceScale ?? defaults.guidanceScale);
  if (o.guidanceScale !== undefined && !pipe.transformer.config.guidanceEmbeds) {
    log.warn(`${what}: guidanceScale is not used: this transformer has no guidance embedding (guidance_embeds false, as FLUX.1-schnell); for classifier-free guidance give trueCfgScale and a negative prompt`);
  }
  const trueCfgScale = checkScale(`${what} trueCfgScale`, o.trueCfgScale ?? 1.0);
  const hasNegative = negative !== undefined || (o.negativePromptEmbeds !== undefined && o.negativePooledPromptEmbeds !== undefined);
  const trueCfg = trueCfgScale > 1 && hasNegative;
  if (hasNegative && !trueCfg) log.warn(`${what}: the negative prompt is not used: true classifier-free guidance needs trueCfgScale > 1 (it is ${trueCfgScale})`);
  if (trueCfgScale > 1 && !hasNegative) log.warn(`${what}: trueCfgScale ${trueCfgScale} is not used: true classifier-free guidance needs a negative prompt (negativePrompt or negativePromptEmbeds)`);
  const numImagesPerPrompt = imagesPerPrompt(what, o.numImagesPerPrompt);
  const prompts = prompt?.length ?? (o.promptEmbeds instanceof dt.Tensor ? o.promptEmbeds.shape[0]! : 1);
  const batch = prompts * numImagesPerPrompt;
  checkDpDivides(what, pipe.mesh, batch, `${prompts} prompt${prompts === 1 ? '' : 's'} x ${numImagesPerPrompt} image${numImagesPerPrompt === 1 ? '' : 's'}`);
  const maxSequenceLength = checkMaxSequenceLength(what, o.maxSequenceLength);
  const guidance = chooseGuidance(what, pipe.mesh, {
    scale: trueCfgScale, on: trueCfg, batched: false, latentsSplitOverDp: true,
    describe: "true CFG's two branches (trueCfgScale > 1 with a negative prompt, on a mesh without 'dp')",
  });
  return {
    what, options: o, height, width, steps, sigmas, guidanceScale, guidance, numImagesPerPrompt, maxSequenceLength, batch,
    outputType: o.outputType ?? 'png', onStep: o.onStep, signal: o.signal, loraScale: o.loraScale,
  };
}

/**
 * How a Flux variant's input pictures are preprocessed (diffusers' VaeImageProcessor with twice the
 * VAE's scale factor: the latents are packed in 2x2 patches) and which tensors pass as latents.
 */
export function fluxImageProcessor(pipe: FluxPipeline): { vaeScaleFactor: number; latentChannels: number } {
  return { vaeScaleFactor: pipe.vaeScaleFactor * 2, latentChannels: pipe.vae.config.latentChannels };
}

/** The latents' height and width of a call: even (2x2 patches). */
export function latentSize(pipe: FluxPipeline, call: FluxCall): [number, number] {
  return [2 * Math.floor(call.height / (pipe.vaeScaleFactor * 2)), 2 * Math.floor(call.width / (pipe.vaeScaleFactor * 2))];
}
