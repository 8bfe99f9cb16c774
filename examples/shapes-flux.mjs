#!/usr/bin/env node
// The built-in default job from code (`npm run example` runs the same through the `dtorch`
// command): shapes-flux, FLUX.1-dev's pipeline at a tiny size trained on drawn shapes, on a mesh
// of 2 CPU devices with sequence parallel (ulysses=2: the image and text tokens split over the
// devices, attention heads traded). Its shipped folder loads as any saved diffusers pipeline.
//   node examples/shapes-flux.mjs [out.png]
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';

const out = process.argv[2] ?? join(tmpdir(), 'dtorch', 'shapes-flux.png'); // not into the source tree
const mesh = new dt.DeviceMesh('cpu', [0, 1], ['ulysses']);
const shapes = hf.registry.trainedPipelines['shapes-flux'];
const pipe = await hf.DiffusionPipeline.fromPretrained(await shapes.folder(), { mesh, dtype: 'float32' });
const { images, timings } = await pipe.generate({
  prompt: 'a large yellow star at the top right on a purple background',
  ...shapes.defaults, // 128x128, 20 steps, true CFG: how it was trained and evaluated
  seed: 0,
  onStep: ({ step, steps }) => process.stdout.isTTY && process.stdout.write(`\rstep ${step}/${steps}`),
});
pipe.dispose();
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, images[0]);
if (process.stdout.isTTY) process.stdout.write('\n');
console.log(`wrote ${out} on ${mesh}`);
console.log(`encode ${timings.encodeMs.toFixed(0)} ms, denoise ${timings.denoiseMs.toFixed(0)} ms, decode ${timings.decodeMs.toFixed(0)} ms`);
