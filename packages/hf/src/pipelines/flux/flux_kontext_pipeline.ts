// FluxKontextPipeline: FLUX.1-Kontext-dev image editing, as diffusers'
// pipelines/flux/pipeline_flux_kontext.py: FluxPipeline's components and lifecycle with its
// hooks (flux_kontext_hooks.ts): the reference image's tokens beside the latents'.
import type * as dt from '@dtorch/api';
import type { ImageInput } from '../../images/image_input.js';
import type { GenerateOutput, PipelineOptions } from '../diffusion_pipeline.js';
import { fluxKontextHooks } from './flux_kontext_hooks.js';
import { fluxComponentsOf } from './flux_img2img_pipeline.js';
import { FluxPipeline, type FluxGenerateOptions } from './flux_pipeline.js';

/** generate()'s options for FLUX.1-Kontext: Flux's, the reference image, maxArea and autoResize. */
export interface FluxKontextGenerateOptions extends FluxGenerateOptions {
  /** The picture to edit (any input of hf.VaeImageProcessor); none: text to image. */
  image?: ImageInput;
  /** The output's pixels at most (default 1024²): height and width keep their aspect ratio at this area, in multiples of 16. */
  maxArea?: number;
  /** Resize the reference to the Kontext resolution nearest its aspect ratio (default true; diffusers' _auto_resize). */
  autoResize?: boolean;
}

/**
 * FLUX.1-Kontext (diffusers' FluxKontextPipeline): the prompt says what to change in `image`;
 * guidance 3.5 and 28 steps by default, the reference's latents beside the generated ones as
 * tokens of their own (ids (1, row, col)), split over 'ulysses' and 'ring' with the rest.
 */
export class FluxKontextPipeline extends FluxPipeline {
  /** The built-in tiny-flux (random weights) as a Kontext pipeline (FLUX.1-Kontext's transformer has FLUX.1's shape). */
  static override tiny(options?: PipelineOptions): Promise<FluxKontextPipeline> {
    return super.tiny(options) as Promise<FluxKontextPipeline>;
  }

  /** The pipeline at `source` (a FLUX.1-Kontext folder or hub id). */
  static override fromPretrained(source: string, options?: PipelineOptions): Promise<FluxKontextPipeline> {
    return super.fromPretrained(source, options) as Promise<FluxKontextPipeline>;
  }

  /** A FluxKontextPipeline over `pipe`'s components, loading nothing (diffusers' from_pipe); they share their models. */
  static fromPipe(pipe: FluxPipeline): FluxKontextPipeline {
    return new FluxKontextPipeline(...fluxComponentsOf('FluxKontextPipeline.fromPipe', pipe));
  }

  /** diffusers' FluxKontextPipeline.__call__ (outputType as FluxPipeline.generate). */
  override generate(options: FluxKontextGenerateOptions & { outputType: 'tensor' | 'latent' }): Promise<GenerateOutput<dt.Tensor>>;
  override generate(options: FluxKontextGenerateOptions & { outputType?: 'png' }): Promise<GenerateOutput<Buffer[]>>;
  override generate(options: FluxKontextGenerateOptions): Promise<GenerateOutput>;
  override generate(options: FluxKontextGenerateOptions): Promise<GenerateOutput> {
    return this.generateWith('FluxKontextPipeline.generate', fluxKontextHooks, options);
  }
}
