// FluxFillPipeline: FLUX.1-Fill-dev inpainting and outpainting, as diffusers'
// pipelines/flux/pipeline_flux_fill.py: FluxPipeline's components (a transformer that takes the
// masked picture's latents and the mask as extra input channels) and lifecycle with its hooks
// (flux_fill_hooks.ts).
import type * as dt from '@dtorch/api';
import { tinyComponents } from '../components.js';
import type { GenerateOutput, PipelineOptions } from '../diffusion_pipeline.js';
import type { InpaintOptions } from '../variants/inpaint.js';
import { fluxFillHooks } from './flux_fill_hooks.js';
import { FLUX_COMPONENTS, FluxPipeline, type FluxGenerateOptions } from './flux_pipeline.js';

/** generate()'s options for FLUX.1-Fill: Flux's, the picture, the mask and strength (paddingMaskCrop is not taken). */
export interface FluxFillGenerateOptions extends FluxGenerateOptions, Omit<InpaintOptions, 'paddingMaskCrop'> {}

/**
 * FLUX.1-Fill (diffusers' FluxFillPipeline): `image` redrawn where `maskImage` is white, the
 * transformer seeing the rest of the picture and the mask; strength 1, guidance 30 and 50 steps by
 * default. Loads from a FLUX.1-Fill-dev folder (`DiffusionPipeline.fromPretrained` picks it from
 * model_index.json).
 */
export class FluxFillPipeline extends FluxPipeline {
  /** The built-in tiny-flux-fill: tiny-flux with a Fill transformer (384 channels in), random weights. */
  static override async tiny(options?: PipelineOptions): Promise<FluxFillPipeline> {
    return new FluxFillPipeline(await tinyComponents('FluxFillPipeline.tiny', 'tiny-flux-fill', FLUX_COMPONENTS, options));
  }

  /** The pipeline at `source` (a FLUX.1-Fill folder or hub id). */
  static override fromPretrained(source: string, options?: PipelineOptions): Promise<FluxFillPipeline> {
    return super.fromPretrained(source, options) as Promise<FluxFillPipeline>;
  }

  /** diffusers' FluxFillPipeline.__call__ (outputType as FluxPipeline.generate). */
  override generate(options: FluxFillGenerateOptions & { outputType: 'tensor' | 'latent' }): Promise<GenerateOutput<dt.Tensor>>;
  override generate(options: FluxFillGenerateOptions & { outputType?: 'png' }): Promise<GenerateOutput<Buffer[]>>;
  override generate(options: FluxFillGenerateOptions): Promise<GenerateOutput>;
  override generate(options: FluxFillGenerateOptions): Promise<GenerateOutput> {
    return this.generateWith('FluxFillPipeline.generate', fluxFillHooks, options);
  }
}
