#!/usr/bin/env node
// A real image: FLUX.1-dev (or SD3-medium, or a diffusers pipeline folder on disk) in bfloat16 on
// the first GPU, at the pipeline's defaults (1024x1024, 28 steps). The first run downloads the
// weights into the HF cache; both models are gated: accept the licence on the model's page and
// export HF_TOKEN. Without a GPU it runs on a CPU device (a tiny folder; the tests run it so).
//   node examples/real-image.mjs [black-forest-labs/FLUX.1-dev | stabilityai/stable-diffusion-3-medium-diffusers | folder] [out.png]
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';

const model = process.argv[2] ?? 'black-forest-labs/FLUX.1-dev';
const out = process.argv[3] ?? join(tmpdir(), 'dtorch', 'real-image.png');

const mesh = new dt.DeviceMesh(dt.cuda.isAvailable() ? 'cuda' : 'cpu', [0]);
const pipe = await hf.DiffusionPipeline.fromPretrained(model, { mesh, dtype: 'bfloat16' }); // the pipeline class from model_index.json
const { images, timings } = await pipe.generate({ prompt: 'a photo of a cat on a windowsill at sunset', seed: 0 });
pipe.dispose();
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, images[0]);
console.log(`wrote ${out} (${model} on ${mesh}): denoise ${(timings.denoiseMs / 1000).toFixed(1)} s`);
