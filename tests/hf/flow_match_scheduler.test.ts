// FlowMatchEulerDiscreteScheduler against diffusers (tools/reference/make_scheduler_fixtures.py):
// the schedules of SD3 (static shift 3.0) and Flux (dynamic shift by image size, the pipeline's
// custom sigmas) within 1e-6 relative of diffusers' float32 tensors, and bit-equal where only
// + − × ÷ are involved; step() and scaleNoise() on small float32 and bfloat16 tensors, bit-equal
// in bfloat16, against diffusers on the CPU and (on a CUDA mesh, skipped without one) diffusers
// on CUDA, whose bfloat16 roundings differ; fromPretrained from a pipeline folder; and a
// DTorchError with a code for each bad input.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { cudaMesh, cudaSkip, skipNote } from '../conformance/meshes.js';

const folder = (name: string) => fileURLToPath(new URL(`../fixtures/hf/schedulers/${name}`, import.meta.url));

interface ScheduleCase {
  name: string;
  config: Record<string, number | boolean | string>;
  n: number | null;
  args: { sigmas?: number[]; timesteps?: number[]; mu?: number };
  setShift?: number;
  timesteps: number[];
  sigmas: number[];
}
interface StepCase {
  name: string;
  config: Record<string, number | boolean>;
  n: number;
  args: { sigmas?: number[]; mu?: number };
  dtype: 'float32' | 'bfloat16';
  shape: number[];
  beginIndex?: number;
  timesteps: number[];
  sample: number[];
  modelOutputs: number[][];
  noise?: number[];
  prevSamples: number[][];
  /** As diffusers computes them on CUDA (its sigmas on the CPU): other bfloat16 roundings. */
  prevSamplesCuda: number[][];
}
interface ScaleNoiseCase {
  name: string;
  config: Record<string, number>;
  n: number;
  dtype: 'float32' | 'bfloat16';
  shape: number[];
  sample: number[];
  noise: number[];
  beginIndex: number;
  beginTimesteps: number[];
  withBeginIndex: number[];
  lookupTimesteps: number[];
  lookedUp: number[];
}
const fixture = JSON.parse(readFileSync(folder('flow_match.json'), 'utf8')) as {
  schedules: ScheduleCase[];
  calculateShift: { imageSeqLen: number; baseSeqLen?: number; maxSeqLen?: number; baseShift?: number; maxShift?: number; mu: number }[];
  steps: StepCase[];
  scaleNoise: ScaleNoiseCase[];
};

/** Largest relative difference |got − want| / |want| (absolute where want is 0). */
function worstRelative(got: readonly number[], want: readonly number[]): number {
  expect(got.length).toBe(want.length);
  return Math.max(0, ...want.map((w, i) => Math.abs(got[i]! - w) / (w === 0 ? 1 : Math.abs(w))));
}

const input = (values: number[], shape: number[], dtype: dt.DType, mesh?: dt.DeviceMesh) => dt.tensor(values, { shape, dtype, mesh });

async function values(x: dt.Tensor): Promise<number[]> {
  return Array.from((await x.data()) as Float32Array);
}

function expectError(fn: () => unknown, code: string, ...parts: (string | RegExp)[]): void {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err, 'it throws').toBeInstanceOf(dt.DTorchError);
  expect((err as dt.DTorchError).code).toBe(code);
  for (const part of parts) expect((err as Error).message).toMatch(part);
}

describe('FlowMatchEulerDiscreteScheduler schedules', () => {
  it.each(fixture.schedules.map((c) => [c.name, c] as const))('%s: timesteps and sigmas as diffusers', (_, c) => {
    const scheduler = hf.FlowMatchEulerDiscreteScheduler.fromConfig(c.config);
    if (c.setShift !== undefined) scheduler.setShift(c.setShift);
    scheduler.setTimesteps(c.n, c.args);
    expect(scheduler.timesteps.length).toBe(c.timesteps.length);
    expect(scheduler.sigmas.length).toBe(c.sigmas.length);
    expect(worstRelative(scheduler.timesteps, c.timesteps), 'timesteps').toBeLessThanOrEqual(1e-6);
    expect(worstRelative(scheduler.sigmas, c.sigmas), 'sigmas').toBeLessThanOrEqual(1e-6);
    expect(scheduler.stepIndex).toBeNull();
    expect(scheduler.beginIndex).toBeNull();
  });

  // only + − × ÷ in float64 or float32 (no exp or pow, whose last bit may differ between libms):
  // the very same numbers, which a missed float32 rounding would break
  const basicArithmetic = fixture.schedules.filter((c) => !c.config['use_dynamic_shifting'] && !c.config['use_karras_sigmas'] && !c.config['use_exponential_sigmas']);
  it.each(basicArithmetic.map((c) => [c.name, c] as const))('%s: bit-equal to diffusers', (_, c) => {
    const scheduler = hf.FlowMatchEulerDiscreteScheduler.fromConfig(c.config);
    if (c.setShift !== undefined) scheduler.setShift(c.setShift);
    scheduler.setTimesteps(c.n, c.args);
    expect(scheduler.timesteps).toEqual(c.timesteps);
    expect(scheduler.sigmas).toEqual(c.sigmas);
  });

  it('covers SD3 n = 28 and 4, and Flux at 256², 512², 1024² with n = 28 and 4', () => {
    const names = fixture.schedules.map((c) => c.name);
    for (const n of [28, 4]) {
      expect(names).toContain(`sd3 n=${n}`);
      for (const size of [256, 512, 1024]) expect(names).toContain(`flux ${size}x${size} n=${n}`);
    }
  });

  it('the Flux cases use calculateShift of (h/16)·(w/16), and calculateShift is the pipeline’s', () => {
    for (const c of fixture.schedules.filter((s) => s.name.startsWith('flux ') && /^flux \d+x\d+ n=\d+$/.test(s.name))) {
      const size = Number(c.name.split(' ')[1]!.split('x')[0]);
      expect(hf.calculateShift((size / 16) * (size / 16))).toBe(c.args.mu);
    }
    for (const row of fixture.calculateShift) {
      expect(hf.calculateShift(row.imageSeqLen, row.baseSeqLen, row.maxSeqLen, row.baseShift, row.maxShift)).toBe(row.mu);
    }
  });

  it('gives the same schedule after another setTimesteps, which resets the step and begin index', () => {
    const c = fixture.schedules.find((s) => s.name === 'sd3 n=28')!;
    const scheduler = hf.FlowMatchEulerDiscreteScheduler.fromConfig(c.config);
    scheduler.setTimesteps(4);
    scheduler.setBeginIndex(2);
    scheduler.setTimesteps(28);
    expect(scheduler.timesteps).toEqual(c.timesteps);
    expect(scheduler.sigmas).toEqual(c.sigmas);
    expect(scheduler.beginIndex).toBeNull();
  });
});

describe('FlowMatchEulerDiscreteScheduler.step and scaleNoise', () => {
  async function expectSteps(c: StepCase, mesh: dt.DeviceMesh, want: number[][]): Promise<void> {
    const scheduler = hf.FlowMatchEulerDiscreteScheduler.fromConfig(c.config);
    scheduler.setTimesteps(c.n, c.args);
    if (c.beginIndex !== undefined) scheduler.setBeginIndex(c.beginIndex);
    let sample = input(c.sample, c.shape, c.dtype, mesh);
    for (const [i, t] of c.timesteps.entries()) {
      const modelOutput = input(c.modelOutputs[i]!, c.shape, c.dtype, mesh);
      const noise = c.noise ? input(c.noise, c.shape, 'float32', mesh) : undefined;
      const { prevSample } = scheduler.step(modelOutput, t, sample, noise ? { noise } : undefined);
      expect(prevSample.dtype).toBe(c.dtype);
      expect(prevSample.shape).toEqual(c.shape);
      expect(scheduler.stepIndex).toBe((c.beginIndex ?? 0) + i + 1);
      const got = await values(prevSample);
      // float32: ≤ 1e-6 relative; bfloat16: bit-equal (the same roundings as PyTorch's kernels)
      if (c.dtype === 'bfloat16') expect(got, `step ${i}`).toEqual(want[i]);
      else expect(worstRelative(got, want[i]!), `step ${i}`).toBeLessThanOrEqual(1e-6);
      sample.dispose();
      modelOutput.dispose();
      noise?.dispose();
      sample = prevSample;
    }
    sample.dispose();
  }

  it.each(fixture.steps.map((c) => [c.name, c] as const))('%s: steps as diffusers on the CPU', (_, c) => expectSteps(c, dt.defaultMesh(), c.prevSamples));

  it('the CUDA references differ from the CPU ones in bfloat16 (so the two tests tell them apart)', () => {
    const differing = (c: StepCase) => c.prevSamples.flat().filter((v, i) => v !== c.prevSamplesCuda.flat()[i]).length;
    for (const c of fixture.steps) expect(differing(c) > 0, c.name).toBe(c.dtype === 'bfloat16');
  });

  const cuda = cudaSkip(1);
  it.skipIf(cuda).each(fixture.steps.map((c) => [c.name, c] as const))(`%s: steps as diffusers on CUDA${skipNote(cuda)}`, (_, c) => expectSteps(c, cudaMesh(1), c.prevSamplesCuda));

  it.each(fixture.scaleNoise.map((c) => [c.name, c] as const))('%s: with a begin index and by timestep lookup', async (_, c) => {
    const sample = input(c.sample, c.shape, c.dtype);
    const noise = input(c.noise, c.shape, c.dtype);
    const scheduler = hf.FlowMatchEulerDiscreteScheduler.fromConfig(c.config);
    scheduler.setTimesteps(c.n);
    scheduler.setBeginIndex(c.beginIndex);
    const begin = scheduler.scaleNoise(sample, c.beginTimesteps, noise);
    expect(begin.dtype).toBe(c.dtype);
    const lookupScheduler = hf.FlowMatchEulerDiscreteScheduler.fromConfig(c.config);
    lookupScheduler.setTimesteps(c.n);
    const lookedUp = lookupScheduler.scaleNoise(sample, c.lookupTimesteps, noise);
    if (c.dtype === 'bfloat16') {
      expect(await values(begin)).toEqual(c.withBeginIndex);
      expect(await values(lookedUp)).toEqual(c.lookedUp);
    } else {
      expect(worstRelative(await values(begin), c.withBeginIndex)).toBeLessThanOrEqual(1e-6);
      expect(worstRelative(await values(lookedUp), c.lookedUp)).toBeLessThanOrEqual(1e-6);
    }
    for (const x of [sample, noise, begin, lookedUp]) x.dispose();
  });

  it('leaves no tensor behind but its result', () => {
    const scheduler = hf.FlowMatchEulerDiscreteScheduler.fromConfig({ shift: 3.0 });
    scheduler.setTimesteps(4);
    const sample = dt.ones([2, 3], { dtype: 'bfloat16' });
    const before = dt.memory().numTensors;
    const { prevSample } = scheduler.step(sample, scheduler.timesteps[0]!, sample);
    const noised = scheduler.scaleNoise(sample, scheduler.timesteps[0]!, sample);
    expect(dt.memory().numTensors).toBe(before + 2);
    for (const x of [sample, prevSample, noised]) x.dispose();
  });
});

describe('FlowMatchEulerDiscreteScheduler.fromPretrained', () => {
  it('reads scheduler/scheduler_config.json of a pipeline folder (SD3 and Flux)', () => Promise.all([
    (async () => {
      const sd3 = await hf.FlowMatchEulerDiscreteScheduler.fromPretrained(folder('sd3'), { subfolder: 'scheduler' });
      expect(sd3.config.shift).toBe(3.0);
      expect(sd3.config.useDynamicShifting).toBe(false);
      expect(sd3.config.shiftTerminal).toBeNull();
      expect(sd3.config.extra).toEqual({});
      sd3.setTimesteps(28);
      expect(sd3.timesteps).toEqual(fixture.schedules.find((c) => c.name === 'sd3 n=28')!.timesteps);
    })(),
    (async () => {
      const flux = await hf.FlowMatchEulerDiscreteScheduler.fromPretrained(folder('flux'), { subfolder: 'scheduler', localFilesOnly: true });
      expect(flux.config.useDynamicShifting).toBe(true);
      expect([flux.config.baseShift, flux.config.maxShift, flux.config.baseImageSeqLen, flux.config.maxImageSeqLen]).toEqual([0.5, 1.15, 256, 4096]);
      const c = fixture.schedules.find((s) => s.name === 'flux 1024x1024 n=28')!;
      const cfg = flux.config;
      flux.setTimesteps(28, { sigmas: c.args.sigmas, mu: hf.calculateShift(4096, cfg.baseImageSeqLen, cfg.maxImageSeqLen, cfg.baseShift!, cfg.maxShift!) });
      expect(flux.sigmas).toEqual(c.sigmas);
    })(),
  ]));

  it('says to pass { subfolder: "scheduler" } for a pipeline folder, and refuses unknown options', async () => {
    const err = await hf.FlowMatchEulerDiscreteScheduler.fromPretrained(folder('sd3')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(dt.DTorchError);
    expect((err as dt.DTorchError).code).toBe('NOT_FOUND');
    expect((err as Error).message).toMatch(/has no scheduler_config\.json.*subfolder: 'scheduler'/);
    const bad = await hf.FlowMatchEulerDiscreteScheduler.fromPretrained(folder('sd3'), { sub_folder: 'scheduler' } as never).catch((e: unknown) => e);
    expect((bad as dt.DTorchError).code).toBe('INVALID_ARGUMENT');
    expect((bad as Error).message).toMatch('sub_folder');
  });
});

describe('FlowMatchEulerDiscreteScheduler bad input', () => {
  const sd3 = () => hf.FlowMatchEulerDiscreteScheduler.fromConfig({ shift: 3.0 });

  it('config: defaults as diffusers, unknown keys kept, bad values named with the fix', () => {
    const config = hf.FlowMatchEulerDiscreteScheduler.fromConfig({ some_future_key: 1 }).config;
    expect([config.numTrainTimesteps, config.shift, config.useDynamicShifting, config.baseShift, config.maxShift]).toEqual([1000, 1.0, false, 0.5, 1.15]);
    expect([config.timeShiftType, config.invertSigmas, config.stochasticSampling, config.shiftTerminal]).toEqual(['exponential', false, false, null]);
    expect(config.extra).toEqual({ some_future_key: 1 });
    const bad = (json: Record<string, unknown>, ...parts: (string | RegExp)[]) => expectError(() => hf.FlowMatchEulerDiscreteScheduler.fromConfig(json as never), 'BAD_CONFIG', ...parts);
    bad({ shift: 'three' }, '"shift" must be a number', '"three"');
    bad({ num_train_timesteps: 0 }, '"num_train_timesteps" must be a positive integer');
    bad({ time_shift_type: 'cosine' }, '"time_shift_type" must be one of "exponential", "linear"');
    bad({ use_karras_sigmas: true, use_exponential_sigmas: true }, 'at most one of');
    bad({ use_beta_sigmas: true }, 'not supported yet');
    bad({ shift_terminal: 1 }, '"shift_terminal" must be a number below 1');
    expectError(() => hf.FlowMatchEulerDiscreteScheduler.fromConfig([] as never), 'INVALID_ARGUMENT', 'scheduler_config.json keys');
  });

  it('setTimesteps: mu missing with dynamic shifting, n < 1, lengths that disagree, misspelt options', () => {
    const flux = hf.FlowMatchEulerDiscreteScheduler.fromConfig({ use_dynamic_shifting: true });
    expectError(() => flux.setTimesteps(28), 'INVALID_ARGUMENT', 'pass { mu }', 'calculateShift');
    expectError(() => flux.setTimesteps(28, { mu: Number.NaN }), 'INVALID_ARGUMENT', 'mu');
    expectError(() => sd3().setTimesteps(0), 'INVALID_ARGUMENT', 'numInferenceSteps', 'integer in [1, 1000]');
    expectError(() => sd3().setTimesteps(2.5), 'INVALID_ARGUMENT', 'integer in [1, 1000]');
    // more steps than the training schedule's timesteps: refused before the schedule is made
    // (1e9 would fill memory: huge_inputs.test.ts tries that in a child process)
    expectError(() => sd3().setTimesteps(1001), 'INVALID_ARGUMENT', 'integer in [1, 1000]', "scheduler's num_train_timesteps");
    expectError(() => sd3().setTimesteps(), 'INVALID_ARGUMENT', 'number of steps');
    expectError(() => sd3().setTimesteps(3, { sigmas: [1, 0.5] }), 'INVALID_ARGUMENT', 'sigmas has 2 values but numInferenceSteps is 3');
    expectError(() => sd3().setTimesteps(null, { sigmas: [1, 0.5], timesteps: [1000] }), 'INVALID_ARGUMENT', 'same length');
    expectError(() => sd3().setTimesteps(4, { sigma: [1] } as never), 'INVALID_ARGUMENT', 'sigma');
  });

  it('step: an unknown timestep, a schedule run to its end', () => {
    const scheduler = sd3();
    scheduler.setTimesteps(2);
    const x = dt.zeros([2]);
    expectError(() => scheduler.step(x, 999.5, x), 'INVALID_ARGUMENT', 'timestep 999.5 is not in the schedule', 'scheduler.timesteps');
    expect(scheduler.stepIndex).toBeNull();
    for (const t of scheduler.timesteps) scheduler.step(x, t, x).prevSample.dispose();
    expectError(() => scheduler.step(x, scheduler.timesteps[0]!, x), 'INVALID_ARGUMENT', 'schedule has ended', 'setTimesteps');
    expectError(() => scheduler.step(x, 1000, x, { seed: 1 }), 'INVALID_ARGUMENT', 'stochastic');
    expectError(() => scheduler.scaleNoise(dt.zeros([3, 2]), [1000, 1000], x), 'SHAPE_MISMATCH', '2 timesteps', '[3, 2]');
    expectError(() => scheduler.setBeginIndex(-1), 'INVALID_ARGUMENT', 'beginIndex');
    x.dispose();
  });
});
