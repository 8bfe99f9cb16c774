// FLUX.1 text to image (diffusers' FluxPipeline), its prompt encoding and its latent layout.
export { FluxPipeline, type FluxGenerateOptions, type FluxPipelineComponents, type FluxPipelineInit } from './flux_pipeline.js';
export { type FluxEncodePromptOptions, type FluxPromptEmbeds } from './flux_prompt.js';
export { packLatents, unpackLatents, latentImageIds } from './flux_latents.js';
export { FluxImg2ImgPipeline, type FluxImg2ImgGenerateOptions } from './flux_img2img_pipeline.js';
export { FluxInpaintPipeline, type FluxInpaintGenerateOptions } from './flux_inpaint_pipeline.js';
export { FluxFillPipeline, type FluxFillGenerateOptions } from './flux_fill_pipeline.js';
export { FluxKontextPipeline, type FluxKontextGenerateOptions } from './flux_kontext_pipeline.js';
export { PREFERRED_KONTEXT_RESOLUTIONS, nearestKontextResolution } from './flux_kontext_hooks.js';
