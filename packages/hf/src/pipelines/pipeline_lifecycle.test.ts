// A variant is its family's hooks with a few overridden (pipeline_lifecycle.ts): here a toy
// variant of tiny-flux that starts part-way into the schedule (prepareLatents keeps the last
// steps, as img2img's strength does) and blends each step (as inpaint does), made by
// FluxPipeline's own tiny() as an instance of its class. The lifecycle runs only the kept
// timesteps, calls the step hook once per step, and frees what the call made.
import { afterAll, beforeAll, expect, test } from 'vitest';
import * as dt from '@dtorch/api';
import type { GenerateOutput, StepInfo } from './diffusion_pipeline.js';
import { fluxHooks, type FluxCall, type FluxEncoded, type FluxStart, type FluxText } from './flux/flux_hooks.js';
import { FluxPipeline, type FluxGenerateOptions } from './flux/flux_pipeline.js';
import type { PipelineHooks } from './pipeline_lifecycle.js';

const blended: number[] = [];
const partWay: PipelineHooks<FluxPipeline, FluxCall, FluxEncoded, FluxText, FluxStart> = {
  ...fluxHooks,
  prepareLatents(pipe, call, timesteps, owned) {
    return { ...fluxHooks.prepareLatents(pipe, call, timesteps, owned), timesteps: timesteps.slice(2) };
  },
  step(pipe, prediction, t, x) {
    blended.push(t);
    const next = pipe.scheduler.step(prediction, t, x).prevSample;
    return next.mul(0.5).add(x.mul(0.5));
  },
};

class PartWayFlux extends FluxPipeline {
  runVariant(options: FluxGenerateOptions): Promise<GenerateOutput> {
    return this.generateWith('PartWayFlux.generate', partWay, options);
  }
}

let pipe: PartWayFlux;
beforeAll(async () => {
  pipe = (await PartWayFlux.tiny()) as PartWayFlux;
});
afterAll(() => pipe?.dispose());

test("a variant overrides where the latents start and how a step is blended, and keeps the family's class", async () => {
  expect(pipe).toBeInstanceOf(PartWayFlux);
  await dt.sync();
  const before = dt.memory().numTensors;
  const steps: StepInfo[] = [];
  const { images } = await pipe.runVariant({ prompt: 'a cat', height: 32, width: 32, numInferenceSteps: 5, seed: 0, maxSequenceLength: 8, outputType: 'latent', onStep: (s) => steps.push(s) });
  const schedule = pipe.scheduler.timesteps;
  expect(steps.map((s) => [s.step, s.steps])).toEqual([[1, 3], [2, 3], [3, 3]]);
  expect(steps.map((s) => s.timestep)).toEqual(schedule.slice(2));
  expect(blended).toEqual(schedule.slice(2));
  expect((images as dt.Tensor).shape).toEqual([1, 4, 64]);
  (images as dt.Tensor).dispose();
  await dt.sync();
  expect(dt.memory().numTensors, 'what the call made is freed').toBe(before);
});
