// FluxImg2ImgPipeline: FLUX.1 image to image, as diffusers' pipelines/flux/pipeline_flux_img2img.py:
// FluxPipeline's components and lifecycle with its image-to-image hooks (flux_img2img_hooks.ts).
// Made like FluxPipeline (fromPretrained of a FluxPipeline folder too, tiny, components), or from
// another Flux pipeline's components without loading anything again (fromPipe).
import type * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';
import type { GenerateOutput, PipelineOptions } from '../diffusion_pipeline.js';
import type { ImageToImageOptions } from '../variants/image_to_image.js';
import { fluxImg2ImgHooks } from './flux_img2img_hooks.js';
import { FluxPipeline, type FluxGenerateOptions, type FluxPipelineComponents, type FluxPipelineInit } from './flux_pipeline.js';

/** A Flux pipeline's components and settings, for another Flux pipeline over the same models (fromPipe). */
export function fluxComponentsOf(what: string, pipe: FluxPipeline): [FluxPipelineComponents, FluxPipelineInit] {
  if (!(pipe instanceof FluxPipeline)) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give a Flux pipeline (FluxPipeline or a variant), got ${pipe === null ? 'null' : typeof pipe === 'object' ? (pipe as object).constructor.name : typeof pipe}`);
  if (pipe.isDisposed) throw new DTorchError(ErrorCode.Disposed, `${what}: the pipeline was disposed`);
  const { scheduler, vae, textEncoder, tokenizer, textEncoder2, tokenizer2, transformer } = pipe;
  return [{ scheduler, vae, textEncoder, tokenizer, textEncoder2, tokenizer2, transformer }, { defaultSampleSize: pipe.defaultSampleSize }];
}

/** generate()'s options for Flux image to image: Flux's, the image and strength. */
export interface FluxImg2ImgGenerateOptions extends FluxGenerateOptions, ImageToImageOptions {}

/**
 * FLUX.1 image to image (diffusers' FluxImg2ImgPipeline): `image` noised `strength` of the way
 * (default 0.6) and denoised towards the prompt; guidance 7.0 and 28 steps by default, the size
 * 1024² unless given (the image is resized to it). The mesh's dims split the work as FluxPipeline's.
 */
export class FluxImg2ImgPipeline extends FluxPipeline {
  /** The built-in tiny-flux (random weights) as an image-to-image pipeline. */
  static override tiny(options?: PipelineOptions): Promise<FluxImg2ImgPipeline> {
    return super.tiny(options) as Promise<FluxImg2ImgPipeline>;
  }

  /** The pipeline at `source` (its own folder or a FluxPipeline's) as an image-to-image pipeline. */
  static override fromPretrained(source: string, options?: PipelineOptions): Promise<FluxImg2ImgPipeline> {
    return super.fromPretrained(source, options) as Promise<FluxImg2ImgPipeline>;
  }

  /**
   * A FluxImg2ImgPipeline over `pipe`'s components, loading nothing (diffusers' from_pipe): the two
   * share their models, so dispose only the last one used.
   */
  static fromPipe(pipe: FluxPipeline): FluxImg2ImgPipeline {
    return new FluxImg2ImgPipeline(...fluxComponentsOf('FluxImg2ImgPipeline.fromPipe', pipe));
  }

  /** diffusers' FluxImg2ImgPipeline.__call__ (outputType as FluxPipeline.generate). */
  override generate(options: FluxImg2ImgGenerateOptions & { outputType: 'tensor' | 'latent' }): Promise<GenerateOutput<dt.Tensor>>;
  override generate(options: FluxImg2ImgGenerateOptions & { outputType?: 'png' }): Promise<GenerateOutput<Buffer[]>>;
  override generate(options: FluxImg2ImgGenerateOptions): Promise<GenerateOutput>;
  override generate(options: FluxImg2ImgGenerateOptions): Promise<GenerateOutput> {
    return this.generateWith('FluxImg2ImgPipeline.generate', fluxImg2ImgHooks, options);
  }
}
