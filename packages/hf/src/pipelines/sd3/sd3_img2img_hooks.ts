// StableDiffusion3Img2ImgPipeline's part of the lifecycle: SD3's hooks (sd3_hooks.ts) with
// diffusers' StableDiffusion3Img2ImgPipeline changes: `image` and `strength` (0.6), 50 steps by
// default, the image preprocessed at the call's size (VaeImageProcessor with the VAE's scale
// factor), the schedule cut by strength, and the start latents the image's noised to the first
// kept timestep, drawn from one generator in diffusers' order (VAE sample, then noise); kept
// whole on every device, as SD3's latents are.
import * as dt from '@dtorch/api';
import type { PipelineHooks, StartLatents } from '../pipeline_lifecycle.js';
import {
  callGenerator, checkImageToImage, imageLatents, loadImage, strengthTimesteps, type ImageToImageSettings,
} from '../variants/image_to_image.js';
import { SD3_GENERATE_OPTIONS, checkSD3Call, sd3Hooks, sd3ImageProcessor, type SD3Call, type SD3Text } from './sd3_hooks.js';
import type { SD3PromptEmbeds } from './sd3_prompt.js';
import type { StableDiffusion3Pipeline } from './sd3_pipeline.js';

/** A StableDiffusion3Img2ImgPipeline call's settings: SD3's, the image and strength. */
export interface SD3Img2ImgCall extends SD3Call {
  readonly img2img: ImageToImageSettings;
}

/** StableDiffusion3Img2ImgPipeline's hooks: SD3's, with its inputs, schedule and start latents. */
export const sd3Img2ImgHooks: PipelineHooks<StableDiffusion3Pipeline, SD3Img2ImgCall, SD3PromptEmbeds, SD3Text, StartLatents> = {
  ...(sd3Hooks as unknown as PipelineHooks<StableDiffusion3Pipeline, SD3Img2ImgCall, SD3PromptEmbeds, SD3Text, StartLatents>),

  checkInputs(pipe, what, options) {
    const { settings, rest } = checkImageToImage(what, options);
    return { ...checkSD3Call(pipe, what, rest, SD3_GENERATE_OPTIONS, { numInferenceSteps: 50 }), img2img: settings };
  },

  async loadInputs(pipe, call, owned) {
    return { ...call, img2img: await loadImage(call.what, call.img2img, call, sd3ImageProcessor(pipe), pipe.vae.mesh, owned) };
  },

  setTimesteps(pipe, call) {
    sd3Hooks.setTimesteps(pipe, call);
    return strengthTimesteps(call.what, pipe.scheduler, call.img2img.strength);
  },

  // diffusers: given latents as they are; else prepare_latents, the image's latents noised
  prepareLatents(pipe, call, timesteps, owned) {
    if (call.options.latents !== undefined) return sd3Hooks.prepareLatents(pipe, call, timesteps, owned);
    const dtype = pipe.transformer.proj_out.weight.dtype;
    const latentSize = [Math.floor(call.height / pipe.vaeScaleFactor), Math.floor(call.width / pipe.vaeScaleFactor)] as const;
    const generator = callGenerator(call.what, call.options.seed);
    const start = imageLatents(call.what, pipe.vae, call.img2img, call.batch, latentSize, generator, dtype);
    const whole = pipe.mesh.shape.map(() => dt.Replicate());
    const latents = dt.tidy(() => {
      const placed = start.redistribute(pipe.mesh, whole);
      const noise = dt.randn(placed.shape, { generator, dtype, mesh: pipe.mesh, placements: whole });
      return pipe.scheduler.scaleNoise(placed, timesteps[0]!, noise);
    });
    start.dispose();
    return { latents, given: false };
  },
};
