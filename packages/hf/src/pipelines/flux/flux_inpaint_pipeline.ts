// FluxInpaintPipeline: FLUX.1 inpainting, as diffusers' pipelines/flux/pipeline_flux_inpaint.py:
// FluxPipeline's components and lifecycle with its inpainting hooks (flux_inpaint_hooks.ts).
import type * as dt from '@dtorch/api';
import type { GenerateOutput, PipelineOptions } from '../diffusion_pipeline.js';
import type { InpaintOptions } from '../variants/inpaint.js';
import { fluxInpaintHooks } from './flux_inpaint_hooks.js';
import { FluxPipeline, type FluxGenerateOptions } from './flux_pipeline.js';
import { fluxComponentsOf } from './flux_img2img_pipeline.js';

/** generate()'s options for Flux inpainting: Flux's, the picture, the mask, strength and the crop. */
export interface FluxInpaintGenerateOptions extends FluxGenerateOptions, InpaintOptions {}

/**
 * FLUX.1 inpainting (diffusers' FluxInpaintPipeline): `image` redrawn where `maskImage` is white,
 * `strength` of the way (default 0.6), kept elsewhere; guidance 7.0 and 28 steps by default.
 */
export class FluxInpaintPipeline extends FluxPipeline {
  /** The built-in tiny-flux (random weights) as an inpainting pipeline. */
  static override tiny(options?: PipelineOptions): Promise<FluxInpaintPipeline> {
    return super.tiny(options) as Promise<FluxInpaintPipeline>;
  }

  /** The pipeline at `source` (its own folder or another Flux pipeline's) as an inpainting pipeline. */
  static override fromPretrained(source: string, options?: PipelineOptions): Promise<FluxInpaintPipeline> {
    return super.fromPretrained(source, options) as Promise<FluxInpaintPipeline>;
  }

  /** A FluxInpaintPipeline over `pipe`'s components, loading nothing (diffusers' from_pipe); they share their models. */
  static fromPipe(pipe: FluxPipeline): FluxInpaintPipeline {
    return new FluxInpaintPipeline(...fluxComponentsOf('FluxInpaintPipeline.fromPipe', pipe));
  }

  /** diffusers' FluxInpaintPipeline.__call__ (outputType as FluxPipeline.generate; 'png' with paddingMaskCrop). */
  override generate(options: FluxInpaintGenerateOptions & { outputType: 'tensor' | 'latent' }): Promise<GenerateOutput<dt.Tensor>>;
  override generate(options: FluxInpaintGenerateOptions & { outputType?: 'png' }): Promise<GenerateOutput<Buffer[]>>;
  override generate(options: FluxInpaintGenerateOptions): Promise<GenerateOutput>;
  override generate(options: FluxInpaintGenerateOptions): Promise<GenerateOutput> {
    return this.generateWith('FluxInpaintPipeline.generate', fluxInpaintHooks, options);
  }
}
