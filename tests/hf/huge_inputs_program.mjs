// One library call with a huge input, for huge_inputs.test.ts, run in a child process so that a
// call which grows until memory runs out is stopped by the test's time bound, not the test runner:
// argv[2] names the call (argv[3] a pipeline folder for the config cases); prints the error's code
// and message as one JSON line, or {"ok":true}.
import * as hf from '@dtorch/hf';

const [name, folder] = process.argv.slice(2);
const prompt = 'a cat';
const calls = {
  'flux-steps': async () => (await hf.FluxPipeline.tiny()).generate({ prompt, numInferenceSteps: 1e9 }),
  'flux-size': async () => (await hf.FluxPipeline.tiny()).generate({ prompt, height: 99984, width: 99984 }),
  'flux-images': async () => (await hf.FluxPipeline.tiny()).generate({ prompt, numImagesPerPrompt: 100_000 }),
  'sd3-steps': async () => (await hf.StableDiffusion3Pipeline.tiny()).generate({ prompt, numInferenceSteps: 1e9 }),
  'sd3-images': async () => (await hf.StableDiffusion3Pipeline.tiny()).generate({ prompt, height: 128, width: 128, numImagesPerPrompt: 10_000_000 }),
  'transformer-layers': () => hf.SD3Transformer2DModel.fromPretrained(folder, { subfolder: 'transformer' }),
  't5-layers': () => hf.T5EncoderModel.fromPretrained(folder, { subfolder: 'text_encoder_3' }),
  'clip-layers': () => hf.CLIPTextModelWithProjection.fromPretrained(folder, { subfolder: 'text_encoder' }),
};
try {
  await calls[name]();
  console.log(JSON.stringify({ ok: true }));
} catch (err) {
  console.log(JSON.stringify({ code: err.code, message: err.message }));
}
