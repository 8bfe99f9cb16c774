// An unfused LoRA adapter's widened input [x | A x] (nn.loraWideProduct) runs as one lora_join
// kernel, and as one layer_norm_modulate_join with the adaLN norm that makes x (the controller's
// fusion, native/core/operators/lora_join.cpp), inside the real pipelines: tiny-flux and tiny-sd3
// with an adapter on every linear run fewer kernels per generate than with DTORCH_LORA_JOIN=0
// (the linear and the cat apart), and give the same latents on CPU workers: bit for bit for
// tiny-sd3; for tiny-flux within float rounding, as its single blocks join the normed tokens once
// for proj_mlp's and q/k/v's adapters (FluxSingleTransformerBlock.sharesLoraJoin: A x of both in
// one matmul, zeros in proj_mlp's buffer for q/k/v's columns), which the setting turns off too.
// The setting is read once per process: each side runs in a process of its own.
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
const singles = pipe.transformer.single_transformer_blocks ?? [];
const shared = [...singles].filter((b) => b.sharesLoraJoin).length;
console.log(JSON.stringify({ kernels: n, shared, singles: singles.length, latents: Array.from(await out.images.to('float32').data()) }));
pipe.dispose();
`;

interface Run {
  kernels: number;
  /** Single blocks whose next forward shares one join (tiny-flux), of `singles`. */
  shared: number;
  singles: number;
  latents: number[];
}

function run(pipeline: 'FluxPipeline' | 'StableDiffusion3Pipeline', file: string, join: '0' | '1'): Run {
  const r = runNode(script(pipeline, file), { DTORCH_LORA_JOIN: join }, 120_000);
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as Run;
}

describe('an unfused LoRA adapter joined in one kernel (lora_join)', () => {
  for (const [pipeline, file] of [
    ['FluxPipeline', 'flux-style.safetensors'],
    ['StableDiffusion3Pipeline', 'sd3-style.safetensors'],
  ] as const) {
    it(`${pipeline}: fewer kernels per generate, the same latents`, () => {
      const fused = run(pipeline, file, '1');
      const apart = run(pipeline, file, '0');
      // at least one kernel fewer per adapted widening linear of each step's blocks, and per
      // single block and step one join fewer (2 steps)
      expect(apart.kernels - fused.kernels).toBeGreaterThanOrEqual(8 + 2 * fused.singles);
      expect(apart.shared).toBe(0);
      if (pipeline === 'StableDiffusion3Pipeline') {
        expect(fused.latents).toEqual(apart.latents);
        return;
      }
      expect(fused.singles).toBeGreaterThan(0);
      expect(fused.shared).toBe(fused.singles);
      const scale = Math.max(...apart.latents.map(Math.abs));
      const worst = Math.max(...fused.latents.map((v, i) => Math.abs(v - apart.latents[i]!)));
      expect(worst).toBeLessThanOrEqual(1e-5 * scale);
    }, 240_000);
  }
});
