// StableDiffusion3InpaintPipeline's part of the lifecycle: SD3's image-to-image hooks with
// diffusers' StableDiffusion3InpaintPipeline changes for a transformer of the latent channels
// (SD3, SD3.5): `maskImage` and `paddingMaskCrop`, the image's latents, the noise and the mask
// kept whole on every device for the blended step (variants/inpaint.ts), and with a crop the
// PNGs pasted back over the picture. diffusers also encodes the masked picture (for 33-channel
// transformers); this transformer does not read it and nothing is drawn after it.
import * as dt from '@dtorch/api';
import type { PipelineHooks, StartLatents } from '../pipeline_lifecycle.js';
import { callGenerator, imageLatents, strengthTimesteps } from '../variants/image_to_image.js';
import { blendedStep, checkInpaint, checkOverlayOutput, latentMask, loadInpaint, overlayCrops, type InpaintBlend, type InpaintSettings } from '../variants/inpaint.js';
import { SD3_GENERATE_OPTIONS, checkSD3Call, sd3Hooks, sd3ImageProcessor, type SD3Call, type SD3Text } from './sd3_hooks.js';
import type { SD3PromptEmbeds } from './sd3_prompt.js';
import type { StableDiffusion3Pipeline } from './sd3_pipeline.js';

/** A StableDiffusion3InpaintPipeline call's settings: SD3's, the picture, the mask, strength and the crop. */
export interface SD3InpaintCall extends SD3Call {
  readonly inpaint: InpaintSettings;
}

/** SD3's start latents, with what the blended step reads. */
export interface SD3InpaintStart extends StartLatents {
  readonly blend: InpaintBlend;
}

/** StableDiffusion3InpaintPipeline's hooks. */
export const sd3InpaintHooks: PipelineHooks<StableDiffusion3Pipeline, SD3InpaintCall, SD3PromptEmbeds, SD3Text, SD3InpaintStart> = {
  ...(sd3Hooks as unknown as PipelineHooks<StableDiffusion3Pipeline, SD3InpaintCall, SD3PromptEmbeds, SD3Text, SD3InpaintStart>),

  checkInputs(pipe, what, options) {
    const { settings, rest } = checkInpaint(what, options);
    const call = checkSD3Call(pipe, what, rest, SD3_GENERATE_OPTIONS, { numInferenceSteps: 50 });
    checkOverlayOutput(what, settings, call.outputType);
    return { ...call, inpaint: settings };
  },

  async loadInputs(pipe, call, owned) {
    return { ...call, inpaint: await loadInpaint(call.what, call.inpaint, call, sd3ImageProcessor(pipe), pipe.vae.mesh, owned) };
  },

  setTimesteps(pipe, call) {
    sd3Hooks.setTimesteps(pipe, call);
    return strengthTimesteps(call.what, pipe.scheduler, call.inpaint.strength);
  },

  // diffusers' prepare_latents (the VAE's sample, then the noise, from one generator; given
  // latents are the noise and the start) and prepare_mask_latents
  prepareLatents(pipe, call, timesteps, owned) {
    const dtype = pipe.transformer.proj_out.weight.dtype;
    const latentSize = [Math.floor(call.height / pipe.vaeScaleFactor), Math.floor(call.width / pipe.vaeScaleFactor)] as const;
    const generator = callGenerator(call.what, call.options.seed);
    const image = imageLatents(call.what, pipe.vae, call.inpaint, call.batch, latentSize, generator, dtype);
    let start: { latents: dt.Tensor; noise: dt.Tensor; imageLatents: dt.Tensor; mask: dt.Tensor };
    try {
      let given: dt.Tensor | undefined;
      if (call.options.latents !== undefined) {
        const s = sd3Hooks.prepareLatents(pipe, call, timesteps, owned);
        given = s.given ? dt.tidy(() => s.latents.clone()) : s.latents;
      }
      const whole = pipe.mesh.shape.map(() => dt.Replicate());
      start = dt.tidy(() => {
        const imageLatents = image.redistribute(pipe.mesh, whole);
        const noise = given ?? dt.randn(imageLatents.shape, { generator, dtype, mesh: pipe.mesh, placements: whole });
        const mask = latentMask(call.what, call.inpaint.mask!, call.batch, latentSize, dtype).redistribute(pipe.mesh, whole);
        const latents = given !== undefined ? noise.clone() : pipe.scheduler.scaleNoise(imageLatents, timesteps[0]!, noise);
        return { latents, noise, imageLatents, mask };
      });
    } finally {
      image.dispose();
    }
    owned.push(start.noise, start.imageLatents, start.mask);
    const blend: InpaintBlend = { imageLatents: start.imageLatents, noise: start.noise, mask: start.mask, timesteps };
    return { latents: start.latents, given: false, blend };
  },

  step(pipe, prediction, t, x, start) {
    return blendedStep(pipe.scheduler, prediction, t, x, start.blend);
  },

  // diffusers' StableDiffusion3InpaintPipeline decodes latents / scaling_factor without adding
  // the VAE's shift_factor (its text-to-image and image-to-image pipelines add it); the same
  // here, so that a seed gives its image
  decode(pipe, latents) {
    return pipe.decode(latents, { shift: false });
  },

  finishImages(_pipe, call, pngs) {
    return overlayCrops(call.inpaint, pngs);
  },
};
