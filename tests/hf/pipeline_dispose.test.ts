// dispose() while generate() calls wait or run: they reject with TENSOR_DISPOSED saying the
// pipeline was disposed (not with what its freed models make of them), as do later calls.
import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';

const small = { prompt: 'a cat', height: 32, width: 32, numInferenceSteps: 1 };


describe.each([
  ['FluxPipeline', () => hf.FluxPipeline.tiny()],
  ['StableDiffusion3Pipeline', () => hf.StableDiffusion3Pipeline.tiny()],
] as const)('%s.dispose()', (name, tiny) => {
  it('rejects the generate() calls started or queued before it, and those after it, as disposed', async () => {
    const pipe: hf.DiffusionPipeline = await tiny();
    const calls = [pipe.generate(small), pipe.generate(small)];
    pipe.dispose();
    expect(pipe.isDisposed).toBe(true);
    const settled = await Promise.allSettled([...calls, pipe.generate(small)]);
    for (const result of settled) {
      expect(result.status).toBe('rejected');
      const err = (result as PromiseRejectedResult).reason as dt.DTorchError;
      expect(err).toBeInstanceOf(dt.DTorchError);
      expect(err.code).toBe(dt.ErrorCode.Disposed);
      expect(err.message).toBe(`${name}.generate: the pipeline was disposed (dispose() freed its models); load it again to generate`);
    }
  });

  it('leaves a pipeline that is not disposed generating', async () => {
    const pipe: hf.DiffusionPipeline = await tiny();
    try {
      const { images } = await pipe.generate(small);
      expect((images as Buffer[]).length).toBe(1);
      expect(pipe.isDisposed).toBe(false);
    } finally {
      pipe.dispose();
    }
  });
});
