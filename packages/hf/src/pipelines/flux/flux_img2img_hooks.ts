// FluxImg2ImgPipeline's part of the lifecycle: Flux's hooks (flux_hooks.ts) with diffusers'
// FluxImg2ImgPipeline changes: `image` and `strength` (0.6), guidance 7.0 by default, the image
// preprocessed at the call's size (VaeImageProcessor with twice the VAE's scale factor, for
// 2x2 patches), the schedule cut by strength, and the start latents the image's noised to the
// first kept timestep, drawn from one generator in diffusers' order (VAE sample, then noise).
import * as dt from '@dtorch/api';
import { batchPlacements } from '../../parallel/batch.js';
import type { PipelineHooks } from '../pipeline_lifecycle.js';
import {
  callGenerator, checkImageToImage, imageLatents, loadImage, strengthTimesteps, type ImageToImageSettings,
} from '../variants/image_to_image.js';
import { FLUX_GENERATE_OPTIONS, checkFluxCall, fluxHooks, fluxImageProcessor, latentSize, type FluxCall, type FluxEncoded, type FluxStart, type FluxText } from './flux_hooks.js';
import { latentImageIds, packLatents } from './flux_latents.js';
import type { FluxPipeline } from './flux_pipeline.js';

/** A FluxImg2ImgPipeline call's settings: Flux's, the image and strength. */
export interface FluxImg2ImgCall extends FluxCall {
  readonly img2img: ImageToImageSettings;
}

/** FluxImg2ImgPipeline's hooks: Flux's, with its inputs, schedule and start latents. */
export const fluxImg2ImgHooks: PipelineHooks<FluxPipeline, FluxImg2ImgCall, FluxEncoded, FluxText, FluxStart> = {
  ...(fluxHooks as unknown as PipelineHooks<FluxPipeline, FluxImg2ImgCall, FluxEncoded, FluxText, FluxStart>),

  checkInputs(pipe, what, options) {
    const { settings, rest } = checkImageToImage(what, options);
    return { ...checkFluxCall(pipe, what, rest, FLUX_GENERATE_OPTIONS, { guidanceScale: 7.0 }), img2img: settings };
  },

  async loadInputs(pipe, call, owned) {
    return { ...call, img2img: await loadImage(call.what, call.img2img, call, fluxImageProcessor(pipe), pipe.vae.mesh, owned) };
  },

  setTimesteps(pipe, call) {
    fluxHooks.setTimesteps(pipe, call);
    return strengthTimesteps(call.what, pipe.scheduler, call.img2img.strength);
  },

  // diffusers' prepare_latents: given latents as they are; else the image's latents noised to the
  // first kept timestep by noise from the same generator, packed
  prepareLatents(pipe, call, timesteps, owned) {
    if (call.options.latents !== undefined) return fluxHooks.prepareLatents(pipe, call, timesteps, owned);
    const [latentHeight, latentWidth] = latentSize(pipe, call);
    const [rows, cols] = [latentHeight / 2, latentWidth / 2];
    const generator = callGenerator(call.what, call.options.seed);
    const start = imageLatents(call.what, pipe.vae, call.img2img, call.batch, [latentHeight, latentWidth], generator, pipe.dtype);
    const latents = dt.tidy(() => {
      const placed = start.redistribute(pipe.mesh, batchPlacements(pipe.mesh));
      const noise = dt.randn(placed.shape, { generator, dtype: pipe.dtype, mesh: pipe.mesh, placements: placed.placements });
      return packLatents(pipe.scheduler.scaleNoise(placed, timesteps[0]!, noise));
    });
    start.dispose();
    const imageIds = latentImageIds(rows, cols, pipe.mesh, pipe.dtype);
    owned.push(imageIds);
    return { latents, given: false, imageIds, rows, cols };
  },
};
