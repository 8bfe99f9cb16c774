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
