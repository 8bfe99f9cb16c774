#!/usr/bin/env node
// The built-in default job from code (`npm run example` runs the same through the `dtorch`
// command): the tiny-flux pipeline on a mesh of 2 CPU devices with sequence parallel
// (ulysses=2: the image and text tokens split over the devices, attention heads traded). Its
// weights are random, so the PNG is noise-like; the tokenizers, shapes and code paths are
// FLUX.1-dev's.
//   node examples/tiny-flux.mjs [out.png]
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as dt from '@dtorch/api';
import * as hf from '@dtorch/hf';

const out = process.argv[2] ?? join(tmpdir(), 'dtorch', 'tiny-flux.png'); // not into the source tree
const mesh = new dt.DeviceMesh('cpu', [0, 1], ['ulysses']);
const pipe = await hf.FluxPipeline.tiny({ mesh });
const { images, timings } = await pipe.generate({
  prompt: 'a photo of a cat',
  height: 512,
  width: 512,
  seed: 0,
  onStep: ({ step, steps }) => process.stdout.isTTY && process.stdout.write(`\rstep ${step}/${steps}`),
});
pipe.dispose();
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, images[0]);
if (process.stdout.isTTY) process.stdout.write('\n');
console.log(`wrote ${out} (tiny-flux has random weights: the image is noise-like) on ${mesh}`);
console.log(`encode ${timings.encodeMs.toFixed(0)} ms, denoise ${timings.denoiseMs.toFixed(0)} ms, decode ${timings.decodeMs.toFixed(0)} ms`);
