// Stable Diffusion 3 text to image (diffusers' StableDiffusion3Pipeline), its built-in tiny-sd3
// components, and its prompt encoding: options, result, text encoders and Prompt (one or a list).
export {
  StableDiffusion3Pipeline,
  tinySD3Components,
  type SD3GenerateOptions,
  type StableDiffusion3Components,
  type TinySD3Options,
} from './sd3_pipeline.js';
export { type Prompt, type SD3EncodePromptOptions, type SD3PromptEmbeds, type SD3TextEncoders } from './sd3_prompt.js';
export { StableDiffusion3Img2ImgPipeline, type SD3Img2ImgGenerateOptions } from './sd3_img2img_pipeline.js';
export { StableDiffusion3InpaintPipeline, type SD3InpaintGenerateOptions } from './sd3_inpaint_pipeline.js';
