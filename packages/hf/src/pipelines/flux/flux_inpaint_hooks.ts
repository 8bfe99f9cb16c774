// FluxInpaintPipeline's part of the lifecycle: Flux's image-to-image hooks with diffusers'
// FluxInpaintPipeline changes: `maskImage` and `paddingMaskCrop`, the mask read beside the
// picture, the image's latents, the noise and the mask kept (packed as the latents are) for the
// blended step (variants/inpaint.ts), and with a crop the PNGs pasted back over the picture.
// diffusers also encodes the masked picture (for Fill-like transformers); FLUX.1's transformer
// does not read it and nothing is drawn after it, so it is not computed here.
import * as dt from '@dtorch/api';
import { batchPlacements } from '../../parallel/batch.js';
import type { PipelineHooks } from '../pipeline_lifecycle.js';
import { callGenerator, imageLatents, strengthTimesteps } from '../variants/image_to_image.js';
import { blendedStep, checkInpaint, checkOverlayOutput, latentMask, loadInpaint, overlayCrops, type InpaintBlend, type InpaintSettings } from '../variants/inpaint.js';
import { FLUX_GENERATE_OPTIONS, checkFluxCall, fluxHooks, fluxImageProcessor, latentSize, type FluxCall, type FluxEncoded, type FluxStart, type FluxText } from './flux_hooks.js';
import { latentImageIds, packLatents } from './flux_latents.js';
import type { FluxPipeline } from './flux_pipeline.js';

/** A FluxInpaintPipeline call's settings: Flux's, the picture, the mask, strength and the crop. */
export interface FluxInpaintCall extends FluxCall {
  readonly inpaint: InpaintSettings;
}

/** Flux's start latents, with what the blended step reads. */
export interface FluxInpaintStart extends FluxStart {
  readonly blend: InpaintBlend;
}

/** FluxInpaintPipeline's hooks. */
export const fluxInpaintHooks: PipelineHooks<FluxPipeline, FluxInpaintCall, FluxEncoded, FluxText, FluxInpaintStart> = {
  ...(fluxHooks as unknown as PipelineHooks<FluxPipeline, FluxInpaintCall, FluxEncoded, FluxText, FluxInpaintStart>),

  checkInputs(pipe, what, options) {
    const { settings, rest } = checkInpaint(what, options);
    const call = checkFluxCall(pipe, what, rest, FLUX_GENERATE_OPTIONS, { guidanceScale: 7.0 });
    checkOverlayOutput(what, settings, call.outputType);
    return { ...call, inpaint: settings };
  },

  async loadInputs(pipe, call, owned) {
    return { ...call, inpaint: await loadInpaint(call.what, call.inpaint, call, fluxImageProcessor(pipe), pipe.vae.mesh, owned) };
  },

  setTimesteps(pipe, call) {
    fluxHooks.setTimesteps(pipe, call);
    return strengthTimesteps(call.what, pipe.scheduler, call.inpaint.strength);
  },

  // diffusers' prepare_latents (the VAE's sample, then the noise, from one generator; given
  // latents are the noise and the start) and prepare_mask_latents, all packed
  prepareLatents(pipe, call, timesteps, owned) {
    const [latentHeight, latentWidth] = latentSize(pipe, call);
    const [rows, cols] = [latentHeight / 2, latentWidth / 2];
    const generator = callGenerator(call.what, call.options.seed);
    const placements = batchPlacements(pipe.mesh);
    const image = imageLatents(call.what, pipe.vae, call.inpaint, call.batch, [latentHeight, latentWidth], generator, pipe.dtype);
    // given latents are the noise too (checked and placed as text-to-image takes them; a copy of the caller's)
    let start: { latents: dt.Tensor; noise: dt.Tensor; imagePacked: dt.Tensor; maskPacked: dt.Tensor };
    try {
      let given: dt.Tensor | undefined;
      if (call.options.latents !== undefined) {
        const s = fluxHooks.prepareLatents(pipe, call, timesteps, owned);
        given = s.given ? dt.tidy(() => s.latents.clone()) : s.latents;
      }
      start = dt.tidy(() => {
        const placed = image.redistribute(pipe.mesh, placements);
        const noise = given ?? packLatents(dt.randn(placed.shape, { generator, dtype: pipe.dtype, mesh: pipe.mesh, placements }));
        const imagePacked = packLatents(placed);
        const mask = latentMask(call.what, call.inpaint.mask!, call.batch, [latentHeight, latentWidth], pipe.dtype);
        const maskPacked = packLatents(mask.redistribute(pipe.mesh, placements).repeat(1, placed.shape[1]!, 1, 1));
        const latents = given !== undefined ? noise.clone() : pipe.scheduler.scaleNoise(imagePacked, timesteps[0]!, noise);
        return { latents, noise, imagePacked, maskPacked };
      });
    } finally {
      image.dispose();
    }
    const imageIds = latentImageIds(rows, cols, pipe.mesh, pipe.dtype);
    owned.push(imageIds, start.noise, start.imagePacked, start.maskPacked);
    const blend: InpaintBlend = { imageLatents: start.imagePacked, noise: start.noise, mask: start.maskPacked, timesteps };
    return { latents: start.latents, given: false, imageIds, rows, cols, blend };
  },

  step(pipe, prediction, t, x, start) {
    return blendedStep(pipe.scheduler, prediction, t, x, start.blend);
  },

  finishImages(_pipe, call, pngs) {
    return overlayCrops(call.inpaint, pngs);
  },
};
