// Runs the service's jobs on its one loaded pipeline. One job alone is exactly `dtorch generate`'s
// call (its prompt, n images, its seed). Several jobs of one batch are one generate() call over
// the batch dimension (split over the mesh's dp dim when it has one): their prompts as a list and
// each job's start latents drawn from its own seed as its own call would draw them, so that a
// job's images are the same batched or alone. On a dp mesh a call's batch is padded to a multiple
// of the dp degree (the extra images dropped), so that any n runs there.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { DiffusionPipeline, type GenerateOptions, type GenerateOutput, type StepInfo } from '../pipelines/diffusion_pipeline.js';
import { FluxPipeline } from '../pipelines/flux/flux_pipeline.js';
import { packLatents } from '../pipelines/flux/flux_latents.js';
import { initialLatents } from '../pipelines/pipeline_inputs.js';
import { StableDiffusion3Pipeline } from '../pipelines/sd3/sd3_pipeline.js';
import { readFileSync } from 'node:fs';
import { imageSize, imageVariant, sizeMultiple, type ImageVariant } from '../cli/image_variant.js';
import { FluxKontextPipeline } from '../pipelines/flux/flux_kontext_pipeline.js';
import type { ImageRequest } from './image_request.js';
import { RequestError } from './request_error.js';
import { applyLoraChoice, loraKey, ServedLoras, type LoraWeight } from './lora_choice.js';

/** What a batch gave: each job's PNGs, in order, and the call's timings. */
export interface BatchOutput {
  /** Each job's PNGs, in the batch's order. */
  images: Buffer[][];
  /** The call's timings. */
  timings: GenerateOutput['timings'];
}

/** A size in pixels; either may be left to the pipeline. */
export interface RunnerSize {
  /** Width in pixels. */
  width?: number;
  /** Height in pixels. */
  height?: number;
}

/** The jobs that may share one call: same size, steps, guidance, negative prompt, LoRA adapters and LoRA scale; an edit runs alone. */
export function batchKey(r: ImageRequest): string {
  if (r.imagePath !== undefined) return JSON.stringify(['edit', r.imagePath]);
  return JSON.stringify([r.width, r.height, r.steps ?? null, r.guidance ?? null, r.negativePrompt ?? null, r.loraScale ?? null, r.lora ? loraKey(r.lora) : null]);
}

/** PipelineRunner's further settings. */
export interface RunnerOptions {
  /** Where each loaded LoRA adapter came from, by name (what GET /v1/loras shows as its source). */
  loraSources?: Readonly<Record<string, string>>;
}

/** The service's pipeline and the settings its jobs start from (a trained pipeline's defaults). */
export class PipelineRunner {
  #pipe: DiffusionPipeline;
  // the image variants, made once over the pipeline's models (fromPipe: nothing loads twice)
  readonly #variants = new Map<boolean, ImageVariant>();
  /** The LoRA adapters loaded on the pipeline when the runner was made, and the default choice among them (the active ones). */
  readonly loras: ServedLoras;
  // the adapters the pipeline runs now (a key of loraKey): changed before a batch only when it asks others
  #loraNow: string | undefined;

  /**
   * @param pipe The pipeline every job runs on, its LoRA adapters loaded (those active now are a job's default).
   * @param defaults What every call starts from (a trained pipeline's defaults), the request on top.
   * @param options Where the adapters came from.
   */
  constructor(
    pipe: DiffusionPipeline,
    readonly defaults: Partial<GenerateOptions> & RunnerSize = {},
    options: RunnerOptions = {},
  ) {
    this.#pipe = pipe;
    this.loras = ServedLoras.of(pipe, options.loraSources);
    const now = this.loras.defaultChoice;
    this.#loraNow = now && loraKey(now);
  }

  /** The pipeline every job runs on. */
  get pipe(): DiffusionPipeline {
    return this.#pipe;
  }

  /**
   * Jobs from now on run on `pipe`, built as the first one (the same model and adapters; a server
   * behind a cluster builds it again on the devices left after a lost worker). The caller frees
   * the old one.
   */
  replacePipeline(pipe: DiffusionPipeline): void {
    this.#pipe = pipe;
    this.#variants.clear();
    this.#loraNow = undefined; // a job's choice is applied again
  }

  // the pipeline's adapters made `choice` (setAdapters / disableLora), unless they are already
  #useLoras(choice: readonly LoraWeight[] | undefined): void {
    if (choice === undefined) return;
    const key = loraKey(choice);
    if (key === this.#loraNow) return;
    this.#loraNow = undefined; // unknown until it has been applied whole
    applyLoraChoice(this.pipe, choice);
    this.#loraNow = key;
  }

  // the pipeline's image-to-image variant (inpainting with `mask`); a 400 naming the field when it has none
  #variant(mask: boolean): ImageVariant {
    let v = this.#variants.get(mask);
    if (!v) {
      try {
        v = imageVariant(this.pipe, mask);
      } catch (err) {
        throw new RequestError(400, mask ? 'mask' : 'image', `${this.pipe.constructor.name} cannot edit${mask ? ' with a mask' : ''}: ${(err as Error).message.replace(/^--\w+: /, '')}`);
      }
      this.#variants.set(mask, v);
    }
    return v;
  }

  /** The size an edit of `image` gets when it names none: the picture's, rounded down to the model's multiple. */
  async editSize(image: Buffer, mask: boolean): Promise<Required<RunnerSize>> {
    try {
      return await imageSize(image, sizeMultiple(this.#variant(mask)), 'image');
    } catch (err) {
      if (err instanceof RequestError) throw err;
      throw new RequestError(400, 'image', `image: ${(err as Error).message.replace(/^image: /, '')}`);
    }
  }

  /** The degree of the mesh's dp dim (1 without one): a call's batch is a multiple of it. */
  get dpDegree(): number {
    const mesh = (this.pipe as { mesh?: dt.DeviceMesh }).mesh;
    const at = mesh?.dimNames?.indexOf('dp') ?? -1;
    return mesh && at >= 0 ? mesh.shape[at]! : 1;
  }

  /** Whether jobs can share a call: the pipeline's start latents can be drawn here per job. */
  get canBatch(): boolean {
    return this.pipe instanceof FluxPipeline || this.pipe instanceof StableDiffusion3Pipeline;
  }

  /** The size a request that names none gets: the defaults', else the pipeline's. */
  defaultSize(): Required<RunnerSize> {
    if (this.defaults.width !== undefined && this.defaults.height !== undefined) return { width: this.defaults.width, height: this.defaults.height };
    const { defaultSampleSize, vaeScaleFactor } = this.pipe as unknown as { defaultSampleSize?: number; vaeScaleFactor?: number };
    const side = (defaultSampleSize ?? 128) * (vaeScaleFactor ?? 8);
    return { width: side, height: side };
  }

  // the start latents of one job, as its own generate() call draws them from its seed
  #startLatents(r: ImageRequest): dt.Tensor {
    const pipe = this.pipe;
    if (pipe instanceof FluxPipeline) {
      const side = (pixels: number) => 2 * Math.floor(pixels / (pipe.vaeScaleFactor * 2));
      const noise = initialLatents('serve', [r.n, pipe.transformer.config.outChannels / 4, side(r.height), side(r.width)], r.seed, pipe.mesh, pipe.dtype);
      try {
        return packLatents(noise);
      } finally {
        noise.dispose();
      }
    }
    if (pipe instanceof StableDiffusion3Pipeline) return pipe.prepareLatents(r.n, r.height, r.width, pipe.transformer.proj_out.weight.dtype, r.seed);
    throw new DTorchError(ErrorCode.Internal, `serve: ${pipe.constructor.name}'s start latents cannot be drawn per job; run it with --max-batch 1`);
  }

  /** Runs `jobs` (of one batchKey) as one call; each step reported to `onStep`; `signal` cancels between steps. */
  async run(jobs: readonly ImageRequest[], onStep: (info: StepInfo) => void, signal: AbortSignal): Promise<BatchOutput> {
    const first = jobs[0];
    if (!first) throw new DTorchError(ErrorCode.Internal, 'serve: an empty batch');
    const options: GenerateOptions & { width: number; height: number } = {
      ...this.defaults,
      width: first.width,
      height: first.height,
      outputType: 'png',
      onStep,
      signal,
      ...(first.steps !== undefined && { numInferenceSteps: first.steps }),
      ...(first.guidance !== undefined && { guidanceScale: first.guidance }),
      ...(first.negativePrompt !== undefined && { negativePrompt: first.negativePrompt }),
      ...(first.loraScale !== undefined && { loraScale: first.loraScale }),
    };
    this.#useLoras(first.lora);
    let latents: dt.Tensor | undefined;
    let pipe: DiffusionPipeline = this.pipe;
    if (first.imagePath !== undefined) {
      // an edit: its variant, its picture and mask read back from where the server wrote them
      const mask = first.maskPath !== undefined;
      const variant = this.#variant(mask);
      pipe = variant;
      const kontext = variant instanceof FluxKontextPipeline;
      Object.assign(options, {
        prompt: first.prompt,
        numImagesPerPrompt: first.n,
        seed: first.seed,
        image: readFileSync(first.imagePath),
        ...(mask && { maskImage: readFileSync(first.maskPath!) }),
        ...(first.strength !== undefined && !kontext && { strength: first.strength }),
        // Kontext keeps the size asked as its area
        ...(kontext && { maxArea: first.width * first.height }),
      });
    } else if (jobs.length === 1 && first.n % this.dpDegree === 0) {
      Object.assign(options, { prompt: first.prompt, numImagesPerPrompt: first.n, seed: first.seed });
    } else {
      // one row per image: each job's prompt n times, its latents from its own seed; on a dp mesh
      // padded to a multiple of its degree with rows whose images are dropped
      const images = jobs.reduce((sum, r) => sum + r.n, 0);
      const pad = (this.dpDegree - (images % this.dpDegree)) % this.dpDegree;
      const last = jobs.at(-1)!;
      const rows = pad > 0 ? [...jobs, { ...last, n: pad }] : jobs;
      const parts = rows.map((r) => this.#startLatents(r));
      latents = dt.cat(parts, 0);
      dt.dispose(parts);
      const prompts = rows.flatMap((r) => new Array<string>(r.n).fill(r.prompt));
      Object.assign(options, { prompt: prompts, numImagesPerPrompt: 1, latents });
      if (first.negativePrompt !== undefined || typeof this.defaults.negativePrompt === 'string') {
        options.negativePrompt = new Array<string>(prompts.length).fill(first.negativePrompt ?? (this.defaults.negativePrompt as string));
      }
    }
    try {
      const { images, timings } = await pipe.generate(options);
      if (!Array.isArray(images)) throw new DTorchError(ErrorCode.Internal, 'serve: asked for PNGs but the pipeline returned a tensor');
      let at = 0;
      return { images: jobs.map((r) => images.slice(at, (at += r.n))), timings };
    } finally {
      latents?.dispose();
    }
  }
}
