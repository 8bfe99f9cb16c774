// An unfused LoRA adapter's widened input [x | A x] (nn.loraWideProduct) runs as one lora_join
// kernel, and as one layer_norm_modulate_join with the adaLN norm that makes x (the controller's
// fusion, native/core/operators/lora_join.cpp), inside the real pipelines: tiny-flux and tiny-sd3
// with an adapter on every linear run fewer kernels per generate than with DTORCH_LORA_JOIN=0
// (the linear and the cat apart), and give the same latents, bit for bit, on CPU workers. The
// setting is read once per process: each side runs in a process of its own.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runNode } from '../engine/run_node.js';

const fixtures = fileURLToPath(new URL('../fixtures/hf/lora/', import.meta.url));

// Kernels run by the second of two generate calls (the first traces), and its latents.
const script = (pipeline: 'FluxPipeline' | 'StableDiffusion3Pipeline', file: string) => `
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';
const kernels = () => dt.workers().reduce((n, w) => n + w.kernelsRun, 0);
const pipe = await hf.${pipeline}.tiny();
await pipe.loadLoraWeights(${JSON.stringify(fixtures + file)});
const generate = () => pipe.generate({ prompt: 'a cat', numInferenceSteps: 2, height: 32, width: 32, outputType: 'latent', seed: 3 });
(await generate()).images.dispose();
await dt.sync();
const start = kernels();
const out = await generate();
await dt.sync();
const n = kernels() - start;
console.log(JSON.stringify({ kernels: n, latents: Array.from(await out.images.to('float32').data()) }));
pipe.dispose();
`;

function run(pipeline: 'FluxPipeline' | 'StableDiffusion3Pipeline', file: string, join: '0' | '1'): { kernels: number; latents: number[] } {
  const r = runNode(script(pipeline, file), { DTORCH_LORA_JOIN: join }, 120_000);
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as { kernels: number; latents: number[] };
}

describe('an unfused LoRA adapter joined in one kernel (lora_join)', () => {
  for (const [pipeline, file] of [
    ['FluxPipeline', 'flux-style.safetensors'],
    ['StableDiffusion3Pipeline', 'sd3-style.safetensors'],
  ] as const) {
    it(`${pipeline}: fewer kernels per generate, the same latents`, () => {
      const fused = run(pipeline, file, '1');
      const apart = run(pipeline, file, '0');
      // at least one kernel fewer per adapted widening linear of each step's blocks
      expect(apart.kernels - fused.kernels).toBeGreaterThanOrEqual(8);
      expect(fused.latents).toEqual(apart.latents);
    }, 240_000);
  }
});
