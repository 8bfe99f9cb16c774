// One fixture case of an image pipeline against diffusers' run (the image pipelines' tests:
// img2img, inpaint, flux_fill, flux_kontext): the call once with outputType 'latent' and once
// with 'tensor', each within `tolerance` of the fixture's "<name>.latent" / "<name>.image", and
// no tensor left behind; and a call refused with a DTorchError of a code and message parts.
import { expect } from 'vitest';
import * as dt from '@dtorch/api';
import { DTorchError } from '@dtorch/common';
import type { SafetensorsHeader } from '@dtorch/external';
import { fixtureTensor } from '../fixture_tensors.js';
import { expectClose } from './expect_close.js';

/** What every image pipeline case of tools/reference gives (image_pipeline_cases.py; snake_case as the scripts write it). */
export interface ImageCase {
  name: string;
  prompt: string | string[];
  guidance_scale?: number;
  strength?: number;
  height: number;
  width: number;
  num_inference_steps: number;
  seed: number;
  max_sequence_length: number;
}

/** The case `name` of `cases`; a name the fixture lacks is an error naming it. */
export function caseNamed<C extends ImageCase>(cases: readonly C[], name: string): C {
  const found = cases.find((c) => c.name === name);
  if (!found) throw new Error(`no fixture case "${name}" (there are ${cases.map((c) => c.name).join(', ')})`);
  return found;
}

/** The arguments of `c` that every image pipeline takes, camelCase (the pictures and a pipeline's own arguments are each test's). */
export function commonOptions(c: ImageCase): { prompt: string | string[]; height: number; width: number; numInferenceSteps: number; seed: number; maxSequenceLength: number; strength?: number; guidanceScale?: number } {
  return {
    prompt: c.prompt, height: c.height, width: c.width, numInferenceSteps: c.num_inference_steps, seed: c.seed, maxSequenceLength: c.max_sequence_length,
    ...(c.strength !== undefined ? { strength: c.strength } : {}),
    ...(c.guidance_scale !== undefined ? { guidanceScale: c.guidance_scale } : {}),
  };
}

/** A pipeline's generate() as these tests call it. */
type Generate = (options: object) => Promise<{ images: unknown; timings: { prepareMs: number } }>;

/** Runs `options` through `generate` for latents and images and compares both with the fixture's case `name`. */
export async function expectFixtureCase(generate: Generate, options: object, io: SafetensorsHeader, name: string, what: string, tolerance = 2e-3): Promise<void> {
  const before = dt.memory().numTensors;
  const latent = await generate({ ...options, outputType: 'latent' });
  const image = await generate({ ...options, outputType: 'tensor' });
  await expectClose(latent.images as dt.Tensor, fixtureTensor(io, `${name}.latent`), tolerance, `${what} latents`);
  await expectClose(image.images as dt.Tensor, fixtureTensor(io, `${name}.image`), tolerance, `${what} images`);
  expect(image.timings.prepareMs).toBeGreaterThan(0);
  dt.dispose([latent.images as dt.Tensor, image.images as dt.Tensor]);
  await dt.sync();
  expect(dt.memory().numTensors, 'no tensors left behind').toBe(before);
}

/** `call` rejects with a DTorchError of `code` whose message holds each of `parts`. */
export async function expectRefused(call: Promise<unknown>, code: string, ...parts: string[]): Promise<void> {
  const err = await call.then(() => undefined, (e: unknown) => e);
  expect(err, JSON.stringify(parts)).toBeInstanceOf(DTorchError);
  expect((err as DTorchError).code).toBe(code);
  for (const p of parts) expect((err as Error).message).toContain(p);
}
