// FlowMatchEulerDiscreteScheduler: diffusers' Euler sampler for flow-matching models (SD3, Flux).
// The schedule is host-side numbers (`timesteps`, `sigmas`, float32 values as diffusers' tensors
// hold them); step() and scaleNoise() are tensor ops on the sample's mesh, in diffusers' dtypes.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkFinite, checkInteger, checkKnownOptions, invalidParameter, isInteger } from '@dtorch/common';
import { openRepo } from '@dtorch/external';
import type { JsonObject } from '../configs/config_file.js';
import { checkPretrainedOptions, inSubfolder, repoOptions, type SourceOptions } from '../loading/options.js';
import { FlowMatchEulerDiscreteConfig } from './flow_match_euler_discrete_config.js';
import {
  exponentialSigmas, float32, float64, karrasSigmas, linspace, staticShift, stretchToTerminal, timeShift, type Round,
} from './sigma_math.js';

const CONFIG_FILE = 'scheduler_config.json';

/** setTimesteps's options, as diffusers' set_timesteps arguments. */
export interface SetTimestepsOptions {
  /** Custom sigmas, one per step (Flux passes linspace(1, 1/n, n)); shifted as the computed ones. */
  sigmas?: readonly number[];
  /** Custom timesteps, one per step; the sigmas are timesteps / numTrainTimesteps. */
  timesteps?: readonly number[];
  /** The dynamic shift (calculateShift of the image size); required when useDynamicShifting. */
  mu?: number;
}

/** step()'s options (diffusers' `generator`, for stochastic sampling). */
export interface SchedulerStepOptions {
  /** Stochastic sampling only: the noise to mix in (float32, the sample's shape); default randn. */
  noise?: dt.Tensor;
  /** Stochastic sampling only: the seed of the default noise. */
  seed?: number;
}

/** What step() returns, as diffusers' FlowMatchEulerDiscreteSchedulerOutput. */
export interface FlowMatchEulerDiscreteSchedulerOutput {
  /** The sample at the next timestep, in the model output's dtype. */
  prevSample: dt.Tensor;
}

/**
 * diffusers' FlowMatchEulerDiscreteScheduler, the Euler sampler of flow-matching models (SD3,
 * Flux): setTimesteps makes the schedule, step() moves the sample one step along the model's
 * velocity.
 */
export class FlowMatchEulerDiscreteScheduler {
  /** The settings, from scheduler_config.json. */
  readonly config: FlowMatchEulerDiscreteConfig;
  /** The schedule's timesteps, high to low (float32 values). */
  timesteps: number[];
  /** One sigma per timestep, then the terminal one (0, or 1 with invertSigmas); float32 values. */
  sigmas: number[];
  /** Steps of the last setTimesteps (null before). */
  numInferenceSteps: number | null = null;
  #shift: number;
  #stepIndex: number | null = null;
  #beginIndex: number | null = null;
  // bounds of the training schedule; setTimesteps spaces its timesteps between them
  readonly #sigmaMin: number;
  readonly #sigmaMax: number;

  constructor(config: FlowMatchEulerDiscreteConfig) {
    if (!(config instanceof FlowMatchEulerDiscreteConfig)) throw invalidParameter('FlowMatchEulerDiscreteScheduler config', 'FlowMatchEulerDiscreteConfig (or use fromConfig)', config);
    this.config = config;
    this.#shift = config.shift;
    // the training schedule: timesteps N..1 as float32, sigmas t / N, statically shifted in float32 (torch)
    const n = config.numTrainTimesteps;
    let sigmas = Array.from({ length: n }, (_, i) => float32((n - i) / n));
    if (!config.useDynamicShifting) sigmas = staticShift(sigmas, config.shift, float32);
    this.sigmas = sigmas;
    this.timesteps = sigmas.map((s) => float32(s * float32(n)));
    this.#sigmaMax = sigmas[0]!;
    this.#sigmaMin = sigmas.at(-1)!;
  }

  /** From scheduler_config.json's keys (snake_case, as diffusers' from_config). */
  static fromConfig(config: JsonObject | FlowMatchEulerDiscreteConfig): FlowMatchEulerDiscreteScheduler {
    if (config instanceof FlowMatchEulerDiscreteConfig) return new FlowMatchEulerDiscreteScheduler(config);
    if (config === null || typeof config !== 'object' || Array.isArray(config)) throw invalidParameter('FlowMatchEulerDiscreteScheduler.fromConfig config', 'an object of scheduler_config.json keys', config);
    return new FlowMatchEulerDiscreteScheduler(FlowMatchEulerDiscreteConfig.fromDict(config));
  }

  /**
   * The scheduler of `source` (a local folder or a hub id), from its scheduler_config.json; a
   * diffusers pipeline keeps it in `{ subfolder: 'scheduler' }`.
   */
  static async fromPretrained(source: string, options?: SourceOptions): Promise<FlowMatchEulerDiscreteScheduler> {
    const what = 'FlowMatchEulerDiscreteScheduler.fromPretrained';
    const o = checkPretrainedOptions<SourceOptions>(what, options);
    const repo = await openRepo(source, repoOptions(o));
    const file = inSubfolder(o.subfolder, CONFIG_FILE);
    if (!repo.has(file)) {
      const hint = repo.has(`scheduler/${CONFIG_FILE}`) ? `; it is a diffusers pipeline: pass { subfolder: 'scheduler' }` : '';
      throw new DTorchError(ErrorCode.NotFound, `${what}: ${repo.description} has no ${file}${hint}`);
    }
    const [path] = await repo.fetch([file]);
    return new FlowMatchEulerDiscreteScheduler(FlowMatchEulerDiscreteConfig.fromFile(path!));
  }

  /** The static shift in use (the config's, unless setShift changed it). */
  get shift(): number {
    return this.#shift;
  }

  /** Changes the static shift used by later setTimesteps calls, as diffusers' set_shift. */
  setShift(shift: number): void {
    checkFinite('setShift shift', shift);
    this.#shift = shift;
  }

  /** Index of the next step's sigma; null until the first step (or scaleNoise's lookup). */
  get stepIndex(): number | null {
    return this.#stepIndex;
  }

  /** Index of the first timestep, set by a pipeline that starts part-way (image-to-image). */
  get beginIndex(): number | null {
    return this.#beginIndex;
  }

  /** Makes the first step() start at timestep index `beginIndex` (diffusers' set_begin_index). */
  setBeginIndex(beginIndex = 0): void {
    checkInteger('setBeginIndex beginIndex', beginIndex, 0, this.timesteps.length - 1);
    this.#beginIndex = beginIndex;
  }

  /**
   * `value` as a number of steps: a whole number from 1 to num_train_timesteps, as diffusers'
   * DDIM-family schedulers bound it (the model was trained on that many timesteps; a count such
   * as 1e9 would only fill memory with the schedule). Else INVALID_ARGUMENT naming `name`.
   */
  checkSteps(name: string, value: unknown): number {
    const max = this.config.numTrainTimesteps;
    if (!isInteger(value) || value < 1 || value > max) throw invalidParameter(name, `integer in [1, ${max}] (at most the scheduler's num_train_timesteps)`, value);
    return value;
  }

  /**
   * The schedule of `numInferenceSteps` steps (or of the custom `sigmas` / `timesteps`, whose
   * length it is when null). Resets the step index and begin index.
   */
  setTimesteps(numInferenceSteps?: number | null, options?: SetTimestepsOptions): void {
    const o = checkKnownOptions<SetTimestepsOptions>('setTimesteps options', options, ['sigmas', 'timesteps', 'mu']);
    const cfg = this.config;
    const custom = (name: 'sigmas' | 'timesteps'): number[] | undefined => {
      const v = o[name];
      if (v === undefined || v === null) return undefined;
      if (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === 'number' && Number.isFinite(x))) {
        throw invalidParameter(`setTimesteps ${name}`, 'non-empty array of finite numbers', v);
      }
      return v as number[];
    };
    const customSigmas = custom('sigmas');
    const customTimesteps = custom('timesteps');
    if (cfg.useDynamicShifting && (o.mu === undefined || o.mu === null)) {
      throw new DTorchError(ErrorCode.InvalidArgument, 'setTimesteps: this scheduler shifts by image size (use_dynamic_shifting): pass { mu }, e.g. calculateShift(imageSeqLen, ...) as the Flux pipeline does');
    }
    if (o.mu !== undefined && o.mu !== null) checkFinite('setTimesteps mu', o.mu);
    if (customSigmas && customTimesteps && customSigmas.length !== customTimesteps.length) {
      throw new DTorchError(ErrorCode.InvalidArgument, `setTimesteps: sigmas (${customSigmas.length}) and timesteps (${customTimesteps.length}) must have the same length`);
    }
    let n: number;
    if (numInferenceSteps === undefined || numInferenceSteps === null) {
      const given = customSigmas ?? customTimesteps;
      if (!given) throw new DTorchError(ErrorCode.InvalidArgument, 'setTimesteps: give the number of steps, or custom sigmas or timesteps');
      n = given.length;
    } else {
      n = this.checkSteps('setTimesteps numInferenceSteps', numInferenceSteps);
      const given = customSigmas ?? customTimesteps;
      if (given && given.length !== n) {
        throw new DTorchError(ErrorCode.InvalidArgument, `setTimesteps: ${customSigmas ? 'sigmas' : 'timesteps'} has ${given.length} values but numInferenceSteps is ${n}; pass as many as there are steps, or numInferenceSteps null`);
      }
    }
    this.numInferenceSteps = n;
    const trainSteps = cfg.numTrainTimesteps;

    // 1. the unshifted sigmas: float64 when computed (numpy), float32 when given
    let r: Round;
    let sigmas: number[];
    if (customSigmas) {
      r = float32;
      sigmas = customSigmas.map(float32);
    } else if (customTimesteps) {
      r = float32;
      sigmas = customTimesteps.map((t) => float32(float32(t) / float32(trainSteps)));
    } else {
      r = float64;
      sigmas = linspace(this.#sigmaMax * trainSteps, this.#sigmaMin * trainSteps, n).map((t) => t / trainSteps);
    }
    // 2. the shift: by image size (mu) or static
    sigmas = cfg.useDynamicShifting ? timeShift(sigmas, o.mu!, cfg.timeShiftType, r) : staticShift(sigmas, this.#shift, r);
    // 3. stretched to end at shift_terminal (0 means none, as in diffusers)
    if (cfg.shiftTerminal) sigmas = stretchToTerminal(sigmas, cfg.shiftTerminal, r);
    // 4. another spacing between the first and last sigma (float64)
    if (cfg.useKarrasSigmas) sigmas = karrasSigmas(sigmas, n);
    else if (cfg.useExponentialSigmas) sigmas = exponentialSigmas(sigmas, n);
    // 5. float32 tensors, timesteps = sigmas · N in float32; 6. the terminal sigma
    const N = float32(trainSteps);
    sigmas = sigmas.map(float32);
    if (cfg.invertSigmas) sigmas = sigmas.map((s) => float32(1 - s));
    this.timesteps = sigmas.map((s) => float32(s * N));
    this.sigmas = [...sigmas, cfg.invertSigmas ? 1 : 0];
    this.#stepIndex = null;
    this.#beginIndex = null;
  }

  /**
   * The index of `timestep` in the schedule; when it appears more than once, the second (so that
   * a schedule started part-way does not skip a sigma), as diffusers.
   */
  indexForTimestep(timestep: number): number {
    checkFinite('indexForTimestep timestep', timestep);
    // compared as float32, as against diffusers' float32 timesteps tensor
    const t = Math.fround(timestep);
    const found: number[] = [];
    this.timesteps.forEach((x, i) => x === t && found.push(i));
    if (found.length === 0) {
      const list = this.timesteps.length > 8 ? `${this.timesteps.slice(0, 8).join(', ')}, ... (${this.timesteps.length} in all)` : this.timesteps.join(', ');
      throw new DTorchError(ErrorCode.InvalidArgument, `FlowMatchEulerDiscreteScheduler: timestep ${timestep} is not in the schedule (${list}); pass one of scheduler.timesteps, after setTimesteps`);
    }
    return found[found.length > 1 ? 1 : 0]!;
  }

  /**
   * One Euler step from `sample` at `timestep` (one of `timesteps`) with the model's velocity
   * `modelOutput`: sample + (σ_next − σ)·modelOutput in float32, cast to modelOutput's dtype.
   */
  step(modelOutput: dt.Tensor, timestep: number, sample: dt.Tensor, options?: SchedulerStepOptions): FlowMatchEulerDiscreteSchedulerOutput {
    if (!(modelOutput instanceof dt.Tensor)) throw invalidParameter('step modelOutput', 'Tensor', modelOutput);
    if (!(sample instanceof dt.Tensor)) throw invalidParameter('step sample', 'Tensor', sample);
    const o = checkKnownOptions<SchedulerStepOptions>('step options', options, ['noise', 'seed']);
    if (o.noise !== undefined && !(o.noise instanceof dt.Tensor)) throw invalidParameter('step noise', 'Tensor', o.noise);
    if ((o.noise !== undefined || o.seed !== undefined) && !this.config.stochasticSampling) {
      throw new DTorchError(ErrorCode.InvalidArgument, 'step: noise and seed are for stochastic sampling; this scheduler has stochastic_sampling false');
    }
    if (this.#stepIndex === null) this.#stepIndex = this.#beginIndex ?? this.indexForTimestep(timestep);
    const index = this.#stepIndex;
    if (index + 1 >= this.sigmas.length) {
      throw new DTorchError(ErrorCode.InvalidArgument, `step: the schedule has ended (step ${index + 1} of ${this.sigmas.length - 1}); call setTimesteps before another denoising loop`);
    }
    const sigma = this.sigmas[index]!;
    const sigmaNext = this.sigmas[index + 1]!;
    const prevSample = dt.tidy(() => {
      const x = dt.to(sample, 'float32');
      let prev: dt.Tensor;
      if (this.config.stochasticSampling) {
        const x0 = dt.sub(x, sigmaTimes(sigma, modelOutput));
        const noise = o.noise ?? dt.randn(sample.shape, { dtype: 'float32', mesh: sample.mesh, placements: sample.placements, seed: o.seed });
        const next = dt.full([], sigmaNext, { dtype: 'float32', mesh: sample.mesh });
        prev = dt.add(dt.mul(dt.sub(1.0, next), x0), dt.mul(next, noise));
      } else {
        prev = dt.add(x, sigmaTimes(float32(sigmaNext - sigma), modelOutput));
      }
      return dt.to(prev, modelOutput.dtype);
    });
    this.#stepIndex = index + 1;
    return { prevSample };
  }

  /**
   * The forward process of flow matching, σ·noise + (1 − σ)·sample in the sample's dtype:
   * image-to-image's starting latents. `timestep` is one for the batch or one per row; with a
   * begin index (or after a step) the current sigma is used, as diffusers.
   */
  scaleNoise(sample: dt.Tensor, timestep: number | readonly number[], noise: dt.Tensor): dt.Tensor {
    if (!(sample instanceof dt.Tensor)) throw invalidParameter('scaleNoise sample', 'Tensor', sample);
    if (!(noise instanceof dt.Tensor)) throw invalidParameter('scaleNoise noise', 'Tensor', noise);
    const ts = typeof timestep === 'number' ? [timestep] : timestep;
    if (!Array.isArray(ts) || ts.length === 0) throw invalidParameter('scaleNoise timestep', 'number or non-empty array of numbers', timestep);
    if (sample.shape.length === 0 || (ts.length !== 1 && ts.length !== sample.shape[0])) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `scaleNoise: ${ts.length} timesteps for a sample of shape [${sample.shape.join(', ')}]; give one, or one per row`);
    }
    const fixed = this.#stepIndex ?? this.#beginIndex;
    const indices = ts.map((t) => fixed ?? this.indexForTimestep(t));
    const shape = [ts.length, ...sample.shape.slice(1).map(() => 1)];
    return dt.tidy(() => {
      // diffusers casts its sigmas to the sample's dtype first
      const sigma = dt.tensor(indices.map((i) => this.sigmas[i]!), { dtype: sample.dtype, shape, mesh: sample.mesh });
      return dt.add(dt.mul(sigma, noise), dt.mul(dt.sub(1.0, sigma), sample));
    });
  }

  /** numTrainTimesteps, as len(scheduler) in diffusers. */
  get length(): number {
    return this.config.numTrainTimesteps;
  }
}

// A sigma (a float32 number) times the model output, as diffusers computes it: its sigmas are
// float32 0-d tensors kept on the CPU. Against a bfloat16 or float16 output, PyTorch's CPU kernels
// round such a tensor to the output's dtype first; its CUDA kernels read it as a float, the way
// they read a Python scalar (checked on an H200 with torch 2.11). A 0-d float32 tensor here does
// the first, a JS number the second.
function sigmaTimes(sigma: number, x: dt.Tensor): dt.Tensor {
  if (x.mesh.deviceType === 'cuda') return dt.mul(x, sigma);
  return dt.mul(dt.full([], sigma, { dtype: 'float32', mesh: x.mesh }), x);
}
