// One generate() call, the same for every pipeline (DESIGN §11.1):
//   checkInputs → [loadInputs] → encodePrompt → setTimesteps → prepareLatents → denoise (predict → guide → step) → decode → [finishImages]
// with the memory floor checked at the call, onStep after each step, the call's AbortSignal
// checked between steps, and one timings report. A pipeline family (Flux, SD3) supplies hooks
// for what is its own: its inputs, how a prompt is encoded, its schedule, where the latents
// start, how its transformer is called, how the latents are decoded. A variant (img2img,
// inpaint, Fill, Kontext; pipelines/variants/) spreads its family's hooks and overrides the few it
// changes: loadInputs (its pictures read), prepareLatents (an image's latents noised at the
// schedule's first timestep, `strength` of the way in), predict (extra transformer inputs: Fill's
// channels, Kontext's tokens), step (inpaint's blended step), finishImages (a crop pasted back). The schedule comes before
// the latents (diffusers' img2img order) so that a start can depend on it; a family's schedule
// depends on the call's size alone. Guidance is guidance.ts's, the same for all.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import type { StepCacheModel } from '../cache/step_cache_model.js';
import type { AutoencoderKL } from '../models/autoencoder_kl/autoencoder_kl.js';
import type { FlowMatchEulerDiscreteScheduler } from '../schedulers/flow_match_euler_discrete_scheduler.js';
import type { StepCache } from '../cache/step_cache.js';
import type { CacheReport, GenerateOutput, StepInfo } from './diffusion_pipeline.js';
import { guidedPrediction, type Guidance, type GuidedInputs } from './guidance.js';
import { imageOutput, type OutputType } from './image_output.js';
import { checkMemoryFloor, generatePhases, type GenerateSizes } from './memory_floor.js';

/** The parts of a pipeline the lifecycle runs: the loop's mesh (the transformer's), the transformer's step cache, the scheduler, the VAE. */
export interface DenoisingParts {
  /** The mesh of the transformer and of the loop. */
  readonly mesh: dt.DeviceMesh;
  /** The denoiser: its step cache (enableCache) is reset at each call and its calls run in their branch's context. */
  readonly transformer: Pick<StepCacheModel, 'stepCache' | 'cacheContext'>;
  /** Sets the timesteps and steps the latents. */
  readonly scheduler: FlowMatchEulerDiscreteScheduler;
  /** Decodes the final latents. */
  readonly vae: AutoencoderKL;
}

/** A generate() call's settings once checked: what every family's carry (each adds its own). */
export interface CallSettings {
  /** What generate() returns. */
  readonly outputType: OutputType;
  /** How classifier-free guidance runs (guidance.ts's chooseGuidance). */
  readonly guidance: Guidance;
  /** Called after each step. */
  readonly onStep: ((info: StepInfo) => void) | undefined;
  /** Cancels the call between steps. */
  readonly signal: AbortSignal | undefined;
  /** Every LoRA adapter's weight times this, for this call (undefined: as set). */
  readonly loraScale: number | undefined;
}

/** Where the denoising loop starts. */
export interface StartLatents {
  /** The starting latents; the loop frees them after its first step unless `given`. */
  readonly latents: dt.Tensor;
  /** They are the caller's own tensor (never freed). */
  readonly given: boolean;
  /** The timesteps the loop runs, when not the whole schedule (img2img: the last `strength` of it). */
  readonly timesteps?: readonly number[];
}

/**
 * What a pipeline family supplies to the lifecycle (a hooks object, spread and overridden by a
 * variant): `P` the pipeline, `C` its call's settings, `E` its text encoders' output, `T` the
 * transformer's text inputs of one guidance branch, `S` where its loop starts. Tensors a hook
 * pushes onto `owned` are freed once the loop ends (or the call fails).
 */
export interface PipelineHooks<P extends DenoisingParts, C extends CallSettings, E, T, S extends StartLatents> {
  /** generate()'s options checked, defaults filled in, the guidance chosen: at the call, before it waits its turn. */
  checkInputs(pipe: P, what: string, options: unknown): C;
  /**
   * Reads what the checked options name outside the devices (an image-to-image call's images:
   * decoded, resized, normalised) into the settings the call runs with; before the call waits
   * its turn. Tensors it makes go to `owned`, freed when the call ends (or fails).
   */
  loadInputs?(pipe: P, call: C, owned: dt.Tensor[]): Promise<C>;
  /** The sizes of the call that its memory floor counts (memory_floor.ts). */
  memorySizes(pipe: P, call: C): GenerateSizes;
  /** The prompt through the text encoders (or the caller's embeddings), and the negative prompt when guidance runs. */
  encodePrompt(pipe: P, call: C, owned: dt.Tensor[]): Promise<E>;
  /**
   * The transformer's text inputs: the prompt's, with the negative prompt's (or both batched) as
   * the call's guidance runs them; recorded in the task that waits for encoding to end, so that
   * it flushes with it.
   */
  textInputs(pipe: P, call: C, encoded: E, owned: dt.Tensor[]): GuidedInputs<T>;
  /** Sets the scheduler's timesteps for this call (from its size and options); returns them. */
  setTimesteps(pipe: P, call: C): readonly number[];
  /**
   * The latents the loop starts from: drawn from the seed, or the caller's (an img2img variant
   * noises an image's at the first of the `timesteps` it keeps).
   */
  prepareLatents(pipe: P, call: C, timesteps: readonly number[], owned: dt.Tensor[]): S;
  /**
   * The transformer's prediction for latents `x` (a batch of both branches when guidance batches
   * them) at timestep `t` with `text`, cut off from the scheduler's part of the step (dt.graph.step).
   */
  predict(pipe: P, x: dt.Tensor, t: number, text: T, start: S): dt.Tensor;
  /** The next latents from the guided prediction; default the scheduler's step (inpaint blends here). */
  step?(pipe: P, prediction: dt.Tensor, t: number, x: dt.Tensor, start: S): dt.Tensor;
  /** The VAE's images [B, 3, H, W] in [-1, 1] for the final latents. */
  decode(pipe: P, latents: dt.Tensor, call: C, start: S): dt.Tensor;
  /** The PNGs written ('png' output) made final: inpainting with a crop pastes them over the picture. */
  finishImages?(pipe: P, call: C, pngs: Buffer[]): Promise<Buffer[]>;
  /** Runs when the call ends, either way: frees what the pipeline cached for it. */
  finish?(pipe: P): void;
}

/**
 * The call's settings (hooks.checkInputs), refused at once when no device could hold the call
 * (its memory floor) or when its signal is already aborted: nothing is recorded either way.
 */
export function checkCall<P extends DenoisingParts, C extends CallSettings, E, T, S extends StartLatents>(pipe: P, hooks: PipelineHooks<P, C, E, T, S>, what: string, options: unknown): C {
  const call = hooks.checkInputs(pipe, what, options);
  checkMemoryFloor(what, [pipe.mesh, pipe.vae.mesh], generatePhases(hooks.memorySizes(pipe, call)), 'lower height and width, or numImagesPerPrompt');
  checkNotCancelled(what, call.signal, 'before it began');
  return call;
}

/** Runs a checked call: prompt, schedule, latents, the denoising loop, decoding; the tensors it made freed. */
export async function runCall<P extends DenoisingParts, C extends CallSettings, E, T, S extends StartLatents>(pipe: P, hooks: PipelineHooks<P, C, E, T, S>, what: string, call: C): Promise<GenerateOutput> {
  const startMs = performance.now();
  const owned: dt.Tensor[] = [];
  // a cache from an earlier call (or one that failed) starts afresh
  const cache = pipe.transformer.stepCache;
  cache?.reset();
  try {
    // waiting for its turn, the call may have been cancelled
    checkNotCancelled(what, call.signal, 'before it began');
    const text = hooks.textInputs(pipe, call, await hooks.encodePrompt(pipe, call, owned), owned);
    await dt.sync();
    const encodedMs = performance.now();

    const timesteps = hooks.setTimesteps(pipe, call);
    const start = hooks.prepareLatents(pipe, call, timesteps, owned);
    let final: dt.Tensor;
    let preparedMs = 0;
    try {
      // the start latents on their own: an image-to-image call's image encoding is a phase of its own
      await dt.sync();
      preparedMs = performance.now();
      const step = hooks.step ?? schedulerStep;
      final = await denoise(what, call, start, start.timesteps ?? timesteps, startMs, (x, t) => {
        const prediction = guidedPrediction(call.guidance, text, x, (input, branchText, branch) =>
          pipe.transformer.cacheContext(branch, () => hooks.predict(pipe, input, t, branchText, start)),
        );
        return step(pipe, prediction, t, x, start);
      });
    } catch (err) {
      if (!start.given) start.latents.dispose();
      throw err;
    } finally {
      dt.dispose(owned.splice(0));
    }
    await dt.sync();
    const denoisedMs = performance.now();
    const cached = cache && cacheReport(cache);
    const timings = (decodeMs: number) => ({ encodeMs: encodedMs - startMs, prepareMs: preparedMs - encodedMs, denoiseMs: denoisedMs - preparedMs, decodeMs, ...(cached && { cache: cached }) });
    if (call.outputType === 'latent') return { images: final, timings: timings(0) };

    let decoded: dt.Tensor;
    try {
      decoded = hooks.decode(pipe, final, call, start);
    } finally {
      final.dispose();
    }
    let images = await imageOutput(decoded, call.outputType);
    if (Array.isArray(images) && hooks.finishImages) images = await hooks.finishImages(pipe, call, images);
    await dt.sync();
    return { images, timings: timings(performance.now() - denoisedMs) };
  } finally {
    dt.dispose(owned);
    cache?.reset(); // the residuals it kept
    hooks.finish?.(pipe);
  }
}

// what the call's step cache decided (generate's timings.cache)
function cacheReport(cache: StepCache): CacheReport {
  const decisions = [...cache.decisions];
  return { kind: cache.kind, config: cache.config, calls: decisions.length, computed: decisions.filter((d) => d.computed).length, decisions };
}

// the scheduler's step: the latents of the next timestep
function schedulerStep(pipe: DenoisingParts, prediction: dt.Tensor, t: number, x: dt.Tensor): dt.Tensor {
  return pipe.scheduler.step(prediction, t, x).prevSample;
}

/**
 * The denoising loop: each step in its own tidy, the previous latents freed once the next are
 * recorded, so live tensors stay flat from step to step. The signal is checked before each step;
 * with onStep, each step waits for the devices before reporting (the progress and the elapsed
 * time are real, not recording's).
 */
async function denoise(what: string, call: CallSettings, start: StartLatents, timesteps: readonly number[], startMs: number, step: (x: dt.Tensor, t: number) => dt.Tensor): Promise<dt.Tensor> {
  let latents = start.latents;
  const steps = timesteps.length;
  try {
    for (let i = 0; i < steps; i++) {
      checkNotCancelled(what, call.signal, `after ${i} of ${steps} steps`);
      const t = timesteps[i]!;
      // one step of the loop: cut into the same segments every step, which the controller recognises
      const next = dt.graph.step(() => dt.tidy(() => step(latents, t)));
      if (i > 0 || !start.given) latents.dispose();
      latents = next;
      if (call.onStep) {
        await dt.sync();
        call.onStep({ step: i + 1, steps, timestep: t, elapsedMs: performance.now() - startMs });
      }
    }
  } catch (err) {
    if (latents !== start.latents) latents.dispose();
    throw err;
  }
  // no steps: the result is a tensor of its own all the same
  return steps === 0 && start.given ? dt.tidy(() => latents.clone()) : latents;
}

// a CANCELLED error once the call's signal is aborted
function checkNotCancelled(what: string, signal: AbortSignal | undefined, when: string): void {
  if (signal?.aborted) throw new DTorchError(ErrorCode.Cancelled, `${what}: cancelled ${when} (its signal was aborted); what it made is freed`);
}
