// generate({ signal }) on both pipelines (the one lifecycle of pipeline_lifecycle.ts): aborted
// between steps, a call rejects with CANCELLED saying so after the step under way, frees what it
// made, and leaves the pipeline generating; aborted before it begins (at the call, or while it
// waits for its turn) it rejects without running a step. Calls made at once take turns and give
// the results of calls made one after the other.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
import { relativeError } from './expect_close.js';

const small = { prompt: 'a cat', height: 32, width: 32, numInferenceSteps: 4, seed: 1, maxSequenceLength: 8, outputType: 'latent' as const };

async function cancelled(call: Promise<unknown>): Promise<dt.DTorchError> {
  const err = await call.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(dt.DTorchError);
  expect((err as dt.DTorchError).code).toBe(dt.ErrorCode.Cancelled);
  return err as dt.DTorchError;
}

// every pipeline, as its built-in tiny one
const pipelines = Object.values(hf.registry.tinyPipelines).map((t) => [t.pipeline, () => t.make()] as const);

describe.each(pipelines)('%s.generate({ signal })', (name, tiny) => {
  it('stops between steps when the signal is aborted, frees what it made, and the pipeline still generates', async () => {
    const pipe: hf.DiffusionPipeline = await tiny();
    try {
      await dt.sync();
      const before = dt.memory().numTensors;
      const controller = new AbortController();
      const steps: number[] = [];
      const err = await cancelled(pipe.generate({ ...small, signal: controller.signal, onStep: (s) => (steps.push(s.step), s.step === 2 && controller.abort()) }));
      expect(steps, 'the step under way finishes, no later one starts').toEqual([1, 2]);
      expect(err.message).toBe(`${name}.generate: cancelled after 2 of 4 steps (its signal was aborted); what it made is freed`);
      await dt.sync();
      expect(dt.memory().numTensors, 'no tensors left behind').toBe(before);
      const { images } = await pipe.generate(small);
      expect((images as dt.Tensor).shape[0]).toBe(1);
      (images as dt.Tensor).dispose();
    } finally {
      pipe.dispose();
    }
  });

  it('rejects a call whose signal is aborted before it begins, at the call or while it waits its turn', async () => {
    const pipe: hf.DiffusionPipeline = await tiny();
    try {
      const steps: number[] = [];
      const onStep = (s: hf.StepInfo) => void steps.push(s.step);
      const err = await cancelled(pipe.generate({ ...small, signal: AbortSignal.abort(), onStep }));
      expect(err.message).toBe(`${name}.generate: cancelled before it began (its signal was aborted); what it made is freed`);
      // the second call waits for the first; aborted meanwhile, it never runs a step
      const controller = new AbortController();
      const first = pipe.generate({ ...small, onStep });
      const second = pipe.generate({ ...small, signal: controller.signal, onStep: () => steps.push(-1) });
      controller.abort();
      dt.dispose((await first).images);
      await cancelled(second);
      expect(steps).toEqual([1, 2, 3, 4]);
      await expect(pipe.generate({ ...small, signal: 'stop' } as never)).rejects.toThrow(new RegExp(`Expected AbortSignal for ${name}.generate signal`));
    } finally {
      pipe.dispose();
    }
  });

  it('runs calls made at once one after the other, with the results of calls made in turn', async () => {
    const pipe: hf.DiffusionPipeline = await tiny();
    try {
      const [a, b] = await Promise.all([pipe.generate(small), pipe.generate({ ...small, numInferenceSteps: 2 })]);
      const [alone, aloneB] = [await pipe.generate(small), await pipe.generate({ ...small, numInferenceSteps: 2 })];
      expect(await relativeError(a.images as dt.Tensor, alone.images as dt.Tensor)).toBe(0);
      expect(await relativeError(b.images as dt.Tensor, aloneB.images as dt.Tensor)).toBe(0);
      dt.dispose([a.images, b.images, alone.images, aloneB.images]);
    } finally {
      pipe.dispose();
    }
  });
});
