// FluxFillPipeline's part of the lifecycle (FLUX.1-Fill-dev, diffusers' pipeline_flux_fill.py):
// Flux's hooks with `image`, `maskImage` and `strength` (default 1: the start is noise), guidance
// 30 over 50 steps by default, the start latents as image to image's (the VAE's sample, then the
// noise), and beside them the transformer's extra input channels: the masked picture
// (image × (1 − mask)) through the VAE (a third draw of the same generator), and the mask at pixel
// resolution folded into the latent grid (each 8x8 block of pixels as 64 channels), both packed
// and joined to the latents' channels at every step.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { batchPlacements } from '../../parallel/batch.js';
import type { PipelineHooks } from '../pipeline_lifecycle.js';
import { callGenerator, checkRepeatsTo, imageLatents, repeatToBatch, strengthTimesteps } from '../variants/image_to_image.js';
import { checkInpaint, loadInpaint, type InpaintSettings } from '../variants/inpaint.js';
import { FLUX_GENERATE_OPTIONS, checkFluxCall, fluxHooks, fluxImageProcessor, latentSize, type FluxCall, type FluxEncoded, type FluxStart, type FluxText } from './flux_hooks.js';
import { latentImageIds, packLatents } from './flux_latents.js';
import type { FluxPipeline } from './flux_pipeline.js';

/** A FluxFillPipeline call's settings: Flux's, the picture, the mask and strength. */
export interface FluxFillCall extends FluxCall {
  readonly fill: InpaintSettings;
}

/** Flux's start latents, with the transformer's extra input: the masked picture's latents and the mask, packed [B, tokens, 4·C + 4·f²]. */
export interface FluxFillStart extends FluxStart {
  readonly condition: dt.Tensor;
}

/** FluxFillPipeline's hooks. */
export const fluxFillHooks: PipelineHooks<FluxPipeline, FluxFillCall, FluxEncoded, FluxText, FluxFillStart> = {
  ...(fluxHooks as unknown as PipelineHooks<FluxPipeline, FluxFillCall, FluxEncoded, FluxText, FluxFillStart>),

  checkInputs(pipe, what, options) {
    const { settings, rest } = checkInpaint(what, options, 1.0);
    if (settings.paddingMaskCrop !== undefined) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: FluxFillPipeline takes no paddingMaskCrop (as diffusers'); give the picture and the mask at the size to fill`);
    const t = pipe.transformer.config;
    const folded = 4 * pipe.vaeScaleFactor * pipe.vaeScaleFactor;
    if (t.inChannels !== 2 * t.outChannels + folded) {
      throw new DTorchError(ErrorCode.BadConfig, `${what}: the transformer's in_channels (${t.inChannels}) must be 2 x out_channels (${t.outChannels}) + ${folded} (the latents, the masked picture's latents and the mask): a FLUX.1-Fill transformer`);
    }
    return { ...checkFluxCall(pipe, what, rest, FLUX_GENERATE_OPTIONS, { guidanceScale: 30.0, numInferenceSteps: 50 }), fill: settings };
  },

  async loadInputs(pipe, call, owned) {
    return { ...call, fill: await loadInpaint(call.what, call.fill, call, fluxImageProcessor(pipe), pipe.vae.mesh, owned) };
  },

  setTimesteps(pipe, call) {
    fluxHooks.setTimesteps(pipe, call);
    return strengthTimesteps(call.what, pipe.scheduler, call.fill.strength);
  },

  // diffusers' prepare_latents (given latents are the start as they are; else the image's sample
  // noised, as image to image) and prepare_mask_latents (the masked picture's sample, the next
  // draw of the same generator; the mask folded), all packed
  prepareLatents(pipe, call, timesteps, owned) {
    const [latentHeight, latentWidth] = latentSize(pipe, call);
    const [rows, cols] = [latentHeight / 2, latentWidth / 2];
    const placements = batchPlacements(pipe.mesh);
    const generator = callGenerator(call.what, call.options.seed);
    let latents: dt.Tensor;
    if (call.options.latents !== undefined) {
      const given = fluxHooks.prepareLatents(pipe, call, timesteps, owned);
      latents = given.given ? dt.tidy(() => given.latents.clone()) : given.latents;
    } else {
      const image = imageLatents(call.what, pipe.vae, call.fill, call.batch, [latentHeight, latentWidth], generator, pipe.dtype);
      try {
        latents = dt.tidy(() => {
          const placed = image.redistribute(pipe.mesh, placements);
          const noise = dt.randn(placed.shape, { generator, dtype: pipe.dtype, mesh: pipe.mesh, placements });
          return packLatents(pipe.scheduler.scaleNoise(placed, timesteps[0]!, noise));
        });
      } finally {
        image.dispose();
      }
    }
    let condition: dt.Tensor;
    try {
      condition = dt.tidy(() => {
        const mask = call.fill.mask!;
        const masked = { ...call.fill, image: dt.mul(call.fill.image!, dt.sub(1, mask)), imageIsLatents: false };
        const maskedLatents = imageLatents(call.what, pipe.vae, masked, call.batch, [latentHeight, latentWidth], generator, pipe.dtype).redistribute(pipe.mesh, placements);
        const folded = foldMask(call.what, mask, call.batch, pipe.vaeScaleFactor, pipe.dtype).redistribute(pipe.mesh, placements);
        return dt.cat([packLatents(maskedLatents), packLatents(folded)], 2);
      });
    } catch (err) {
      latents.dispose();
      throw err;
    }
    const imageIds = latentImageIds(rows, cols, pipe.mesh, pipe.dtype);
    owned.push(imageIds, condition);
    return { latents, given: false, imageIds, rows, cols, condition };
  },

  // the latents joined to the condition's channels, as diffusers' torch.cat((latents, masked_image_latents), dim=2)
  predict(pipe, x, t, text, start) {
    const condition = x.shape[0] === start.condition.shape[0] ? start.condition : dt.cat([start.condition, start.condition], 0);
    return fluxHooks.predict(pipe, dt.cat([x, condition], 2), t, text, start);
  },
};

// The mask [B, 1, H, W] at pixel resolution as [B, f², H/f, W/f] (each f x f block of pixels in
// the channels), repeated to `batch` rows: diffusers' view / permute / reshape
function foldMask(what: string, mask: dt.Tensor, batch: number, f: number, dtype: dt.DType): dt.Tensor {
  const [rows, , height, width] = mask.shape as [number, number, number, number];
  const [h, w] = [height / f, width / f];
  const folded = mask.reshape([rows, h, f, w, f]).permute([0, 2, 4, 1, 3]).reshape([rows, f * f, h, w]).to(dtype);
  checkRepeatsTo(what, rows, batch, 'mask');
  return repeatToBatch(folded, batch);
}
