// StableDiffusion3Img2ImgPipeline: SD3 image to image, as diffusers'
// pipelines/stable_diffusion_3/pipeline_stable_diffusion_3_img2img.py: StableDiffusion3Pipeline's
// components and lifecycle with its image-to-image hooks (sd3_img2img_hooks.ts). Made like
// StableDiffusion3Pipeline (fromPretrained of its folder too, tiny, components), or from another
// SD3 pipeline's components without loading anything again (fromPipe).
import type * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import type { GenerateOutput, PipelineOptions } from '../diffusion_pipeline.js';
import type { ImageToImageOptions } from '../variants/image_to_image.js';
import { sd3Img2ImgHooks } from './sd3_img2img_hooks.js';
import { StableDiffusion3Pipeline, type SD3GenerateOptions, type StableDiffusion3Components, type TinySD3Options } from './sd3_pipeline.js';

/** An SD3 pipeline's components, for another SD3 pipeline over the same models (fromPipe). */
export function sd3ComponentsOf(what: string, pipe: StableDiffusion3Pipeline): StableDiffusion3Components {
  if (!(pipe instanceof StableDiffusion3Pipeline)) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give an SD3 pipeline (StableDiffusion3Pipeline or a variant), got ${pipe === null ? 'null' : typeof pipe === 'object' ? (pipe as object).constructor.name : typeof pipe}`);
  if (pipe.isDisposed) throw new DTorchError(ErrorCode.Disposed, `${what}: the pipeline was disposed`);
  if (!pipe.textEncoder || !pipe.textEncoder2) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: the pipeline's text encoders were released; make the other pipeline before releaseTextEncoders()`);
  const { scheduler, textEncoder, tokenizer, textEncoder2, tokenizer2, textEncoder3, tokenizer3, transformer, vae } = pipe;
  return { scheduler, textEncoder, tokenizer, textEncoder2, tokenizer2, textEncoder3, tokenizer3, transformer, vae };
}

/** generate()'s options for SD3 image to image: SD3's, the image and strength. */
export interface SD3Img2ImgGenerateOptions extends SD3GenerateOptions, ImageToImageOptions {}

/**
 * Stable Diffusion 3 / 3.5 image to image (diffusers' StableDiffusion3Img2ImgPipeline): `image`
 * noised `strength` of the way (default 0.6) and denoised towards the prompt; 50 steps and
 * guidance 7.0 by default, the size the transformer's sample size unless given (the image is
 * resized to it). The mesh's dims split the work as StableDiffusion3Pipeline's.
 */
export class StableDiffusion3Img2ImgPipeline extends StableDiffusion3Pipeline {
  /** The built-in tiny-sd3 (random weights) as an image-to-image pipeline. */
  static override tiny(options?: TinySD3Options): Promise<StableDiffusion3Img2ImgPipeline> {
    return super.tiny(options) as Promise<StableDiffusion3Img2ImgPipeline>;
  }

  /** The pipeline at `source` (its own folder or a StableDiffusion3Pipeline's) as an image-to-image pipeline. */
  static override fromPretrained(source: string, options?: PipelineOptions): Promise<StableDiffusion3Img2ImgPipeline> {
    return super.fromPretrained(source, options) as Promise<StableDiffusion3Img2ImgPipeline>;
  }

  /**
   * A StableDiffusion3Img2ImgPipeline over `pipe`'s components, loading nothing (diffusers'
   * from_pipe): the two share their models, so dispose only the last one used.
   */
  static fromPipe(pipe: StableDiffusion3Pipeline): StableDiffusion3Img2ImgPipeline {
    return new StableDiffusion3Img2ImgPipeline(sd3ComponentsOf('StableDiffusion3Img2ImgPipeline.fromPipe', pipe));
  }

  /** diffusers' StableDiffusion3Img2ImgPipeline.__call__ (outputType as StableDiffusion3Pipeline.generate). */
  override generate(options: SD3Img2ImgGenerateOptions & { outputType: 'tensor' | 'latent' }): Promise<GenerateOutput<dt.Tensor>>;
  override generate(options?: SD3Img2ImgGenerateOptions & { outputType?: 'png' }): Promise<GenerateOutput<Buffer[]>>;
  override generate(options?: SD3Img2ImgGenerateOptions): Promise<GenerateOutput>;
  override generate(options: SD3Img2ImgGenerateOptions = {}): Promise<GenerateOutput> {
    return this.generateWith('StableDiffusion3Img2ImgPipeline.generate', sd3Img2ImgHooks, options);
  }
}
