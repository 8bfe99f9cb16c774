// FlowMatchEulerDiscreteScheduler's scheduler_config.json: diffusers' keys and defaults
// (schedulers/scheduling_flow_match_euler_discrete.py), camelCase. `_class_name` and
// `_diffusers_version` are diffusers' bookkeeping; other unknown keys are kept in `extra`.
import { log } from '@dtorch/common';
import { ConfigReader, type JsonObject } from '../configs/config_file.js';

/** How the dynamic shift bends the sigmas: e^mu / (e^mu + (1/σ − 1)) ('exponential', diffusers' default) or mu / (mu + (1/σ − 1)). */
export type TimeShiftType = 'exponential' | 'linear';

const CLASS_NAME = 'FlowMatchEulerDiscreteScheduler';

/** A FlowMatchEulerDiscreteScheduler's settings: scheduler_config.json's keys, camelCase, with diffusers' defaults. */
export class FlowMatchEulerDiscreteConfig {
  /** The file the config was read from ('<dict>' when built in code). */
  readonly file: string;
  /** The training schedule's length (num_train_timesteps, default 1000): timesteps run from it down. */
  readonly numTrainTimesteps: number;
  /** The static shift of the sigmas (SD3: 3.0); unused when useDynamicShifting. */
  readonly shift: number;
  /** Shift by `mu` given to setTimesteps, from the image size (Flux). */
  readonly useDynamicShifting: boolean;
  /** The dynamic shift at baseImageSeqLen tokens (base_shift, default 0.5), for calculateShift. */
  readonly baseShift: number | null;
  /** The dynamic shift at maxImageSeqLen tokens (max_shift, default 1.15), for calculateShift. */
  readonly maxShift: number | null;
  /** base_image_seq_len (default 256), for calculateShift. */
  readonly baseImageSeqLen: number;
  /** max_image_seq_len (default 4096), for calculateShift. */
  readonly maxImageSeqLen: number;
  /** Sigmas run 0 → 1 (Mochi). */
  readonly invertSigmas: boolean;
  /** Stretch the shifted sigmas so that the last one is this value; null (or 0) for none. */
  readonly shiftTerminal: number | null;
  /** Respace the sigmas as Karras et al. (ρ = 7) between the first and the last; default false. */
  readonly useKarrasSigmas: boolean;
  /** Respace the sigmas evenly in log between the first and the last; default false. */
  readonly useExponentialSigmas: boolean;
  /** diffusers' beta-distributed sigmas; only false is supported (true is a BAD_CONFIG error). */
  readonly useBetaSigmas: boolean;
  /** time_shift_type: the form of the dynamic shift (default 'exponential'). */
  readonly timeShiftType: TimeShiftType;
  /** step() mixes fresh noise into the predicted clean sample instead of an Euler step. */
  readonly stochasticSampling: boolean;
  /** Keys of the file that this class does not read. */
  readonly extra: JsonObject;

  constructor(reader: ConfigReader) {
    this.file = reader.file;
    const className = reader.optionalString('_class_name');
    if (className !== null && className !== CLASS_NAME) log.warn(`${reader.file}: a ${className} config read as ${CLASS_NAME}'s`);
    reader.derived('_diffusers_version');
    this.numTrainTimesteps = reader.integer('num_train_timesteps', 1000);
    if (this.numTrainTimesteps < 1) throw reader.bad('num_train_timesteps', 'a positive integer', this.numTrainTimesteps);
    this.shift = reader.number('shift', 1.0);
    if (this.shift <= 0) throw reader.bad('shift', 'a positive number (1.0 for no shift)', this.shift);
    this.useDynamicShifting = reader.boolean('use_dynamic_shifting', false);
    this.baseShift = optionalNumber(reader, 'base_shift', 0.5);
    this.maxShift = optionalNumber(reader, 'max_shift', 1.15);
    this.baseImageSeqLen = reader.integer('base_image_seq_len', 256);
    this.maxImageSeqLen = reader.integer('max_image_seq_len', 4096);
    this.invertSigmas = reader.boolean('invert_sigmas', false);
    this.shiftTerminal = optionalNumber(reader, 'shift_terminal', null);
    // 1 would divide by zero when stretching
    if (this.shiftTerminal !== null && this.shiftTerminal >= 1) throw reader.bad('shift_terminal', 'a number below 1 (the last sigma), or null', this.shiftTerminal);
    this.useKarrasSigmas = reader.boolean('use_karras_sigmas', false);
    this.useExponentialSigmas = reader.boolean('use_exponential_sigmas', false);
    this.useBetaSigmas = reader.boolean('use_beta_sigmas', false);
    const conversions = [this.useKarrasSigmas, this.useExponentialSigmas, this.useBetaSigmas].filter(Boolean).length;
    if (conversions > 1) throw reader.bad('use_karras_sigmas', 'true for at most one of use_karras_sigmas, use_exponential_sigmas and use_beta_sigmas', this.useKarrasSigmas);
    // diffusers takes beta sigmas from scipy's beta.ppf; not ported
    if (this.useBetaSigmas) throw reader.bad('use_beta_sigmas', 'false (beta sigmas are not supported yet; use_karras_sigmas or use_exponential_sigmas are)', true);
    this.timeShiftType = reader.oneOf('time_shift_type', ['exponential', 'linear'] as const, 'exponential');
    this.stochasticSampling = reader.boolean('stochastic_sampling', false);
    this.extra = reader.unread();
  }

  /** From the scheduler_config.json at `path`. */
  static fromFile(path: string): FlowMatchEulerDiscreteConfig {
    return new FlowMatchEulerDiscreteConfig(ConfigReader.fromFile(path));
  }

  /** From scheduler_config.json's own keys, e.g. `fromDict({ shift: 3.0 })`. */
  static fromDict(values: JsonObject): FlowMatchEulerDiscreteConfig {
    return new FlowMatchEulerDiscreteConfig(new ConfigReader(`${CLASS_NAME} config (from a dict)`, values));
  }
}

// a number that may be null in the file (diffusers' `float | None`); absent gives `fallback`
function optionalNumber(reader: ConfigReader, key: string, fallback: number | null): number | null {
  const value = reader.json[key];
  if (value === null) {
    reader.derived(key);
    return null;
  }
  return value === undefined ? (reader.derived(key), fallback) : reader.number(key);
}
