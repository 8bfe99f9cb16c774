// What every text-to-image pipeline of this package shares, as diffusers' DiffusionPipeline:
// fromPretrained reads a pipeline folder (model_index.json and one subfolder per component) or
// a hub id, `generate` runs prompt encoding, the denoising loop and decoding, and returns PNGs,
// a tensor in [0, 1] or the final latents. DiffusionPipeline.fromPretrained picks the class from
// model_index.json's _class_name (FluxPipeline, StableDiffusion3Pipeline).
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { openRepo } from '@dtorch/external';
import { checkPretrainedOptions, repoOptions, type FromPretrainedOptions } from '../loading/options.js';
import type { OutputType } from './image_output.js';
import { readModelIndex, type ModelIndex } from './model_index.js';

/** Where a pipeline's components live. */
export interface PipelineOptions extends Omit<FromPretrainedOptions, 'subfolder'> {
  /** The mesh of the transformer, the VAE and the denoising loop (dims named cfg, ulysses, ring, tp, dp split the work). */
  mesh?: dt.DeviceMesh;
  /** The text encoders' mesh (default `mesh`): a text encoder can live elsewhere, or be released after encoding. */
  textEncoderMesh?: dt.DeviceMesh;
  /** The parameters' dtype (default float32; bfloat16 on GPUs is what diffusers users run). */
  dtype?: dt.DType;
}

/** One finished denoising step, for progress reporting. */
export interface StepInfo {
  /** 1-based. */
  step: number;
  steps: number;
  timestep: number;
  /** Milliseconds since generate() began. */
  elapsedMs: number;
}

/** diffusers' __call__ arguments, camelCase; each pipeline documents the ones it takes and its defaults. */
export interface GenerateOptions {
  prompt?: string | readonly string[];
  /** The second text encoder's prompt (default `prompt`). */
  prompt2?: string | readonly string[];
  /** The third text encoder's prompt (SD3's T5; default `prompt`). */
  prompt3?: string | readonly string[];
  negativePrompt?: string | readonly string[];
  negativePrompt2?: string | readonly string[];
  negativePrompt3?: string | readonly string[];
  height?: number;
  width?: number;
  numInferenceSteps?: number;
  guidanceScale?: number;
  /** Flux: true classifier-free guidance when > 1 and a negative prompt is given. */
  trueCfgScale?: number;
  seed?: number;
  numImagesPerPrompt?: number;
  maxSequenceLength?: number;
  /** Initial latents (as diffusers' `latents`), instead of drawing them from `seed`. */
  latents?: dt.Tensor;
  /** Encoded prompts instead of `prompt` (each pipeline names the ones it takes: pooled, negative). */
  promptEmbeds?: dt.Tensor;
  pooledPromptEmbeds?: dt.Tensor;
  negativePromptEmbeds?: dt.Tensor;
  negativePooledPromptEmbeds?: dt.Tensor;
  outputType?: OutputType;
  /** Called after each step; it may not keep the tensors it does not own. */
  onStep?: (info: StepInfo) => void;
}

/**
 * What generate() returns: PNG files, [B, 3, H, W] float32 in [0, 1], or the final latents.
 * `Images` follows the call's outputType (each pipeline's generate() overloads say which).
 */
export interface GenerateOutput<Images extends Buffer[] | dt.Tensor = Buffer[] | dt.Tensor> {
  images: Images;
  /** Milliseconds spent per phase: encode, denoise, decode. */
  timings: { encodeMs: number; denoiseMs: number; decodeMs: number };
}

export interface PipelineClass {
  readonly name: string;
  fromPretrained(source: string, options?: PipelineOptions): Promise<DiffusionPipeline>;
}

const registry = new Map<string, PipelineClass>();

/** Makes DiffusionPipeline.fromPretrained load `cls` for model_index.json's _class_name `cls.name`. */
export function registerPipeline(cls: PipelineClass): void {
  registry.set(cls.name, cls);
}

export abstract class DiffusionPipeline {
  abstract generate(options: GenerateOptions): Promise<GenerateOutput>;
  /** Frees every component's parameters. */
  abstract dispose(): void;

  /** The pipeline at `source` (a folder or hub id), of the class its model_index.json names. */
  static async fromPretrained(source: string, options?: PipelineOptions): Promise<DiffusionPipeline> {
    const what = 'DiffusionPipeline.fromPretrained';
    const o = checkPretrainedOptions<PipelineOptions>(what, options, ['mesh', 'dtype', 'textEncoderMesh']);
    const index = await fetchModelIndex(what, source, o);
    const cls = registry.get(index.className);
    if (!cls) {
      throw new DTorchError(ErrorCode.NotFound, `${what}: ${source} is a ${index.className}; DTorch has ${[...registry.keys()].join(', ') || 'no pipelines'}`);
    }
    return cls.fromPretrained(source, options);
  }
}

/** The model_index.json of `source`, or a NOT_FOUND error saying it is not a pipeline. */
export async function fetchModelIndex(what: string, source: string, options: PipelineOptions): Promise<ModelIndex> {
  const repo = await openRepo(source, repoOptions(options));
  if (!repo.has('model_index.json')) {
    throw new DTorchError(ErrorCode.NotFound, `${what}: ${repo.description} has no model_index.json; give a diffusers pipeline folder or hub id (one model alone loads with its class's fromPretrained)`);
  }
  const [path] = await repo.fetch(['model_index.json']);
  return readModelIndex(path!);
}
