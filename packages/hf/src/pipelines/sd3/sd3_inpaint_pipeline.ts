// StableDiffusion3InpaintPipeline: SD3 inpainting, as diffusers'
// pipelines/stable_diffusion_3/pipeline_stable_diffusion_3_inpaint.py for a transformer of the
// latent channels: StableDiffusion3Pipeline's components and lifecycle with its inpainting hooks
// (sd3_inpaint_hooks.ts).
import type * as dt from '@dtorch/api';
import type { GenerateOutput, PipelineOptions } from '../diffusion_pipeline.js';
import type { InpaintOptions } from '../variants/inpaint.js';
import { sd3ComponentsOf } from './sd3_img2img_pipeline.js';
import { sd3InpaintHooks } from './sd3_inpaint_hooks.js';
import { StableDiffusion3Pipeline, type SD3GenerateOptions, type TinySD3Options } from './sd3_pipeline.js';

/** generate()'s options for SD3 inpainting: SD3's, the picture, the mask, strength and the crop. */
export interface SD3InpaintGenerateOptions extends SD3GenerateOptions, InpaintOptions {}

/**
 * Stable Diffusion 3 / 3.5 inpainting (diffusers' StableDiffusion3InpaintPipeline): `image`
 * redrawn where `maskImage` is white, `strength` of the way (default 0.6), kept elsewhere; 50
 * steps and guidance 7.0 by default.
 */
export class StableDiffusion3InpaintPipeline extends StableDiffusion3Pipeline {
  /** The built-in tiny-sd3 (random weights) as an inpainting pipeline. */
  static override tiny(options?: TinySD3Options): Promise<StableDiffusion3InpaintPipeline> {
    return super.tiny(options) as Promise<StableDiffusion3InpaintPipeline>;
  }

  /** The pipeline at `source` (its own folder or another SD3 pipeline's) as an inpainting pipeline. */
  static override fromPretrained(source: string, options?: PipelineOptions): Promise<StableDiffusion3InpaintPipeline> {
    return super.fromPretrained(source, options) as Promise<StableDiffusion3InpaintPipeline>;
  }

  /** A StableDiffusion3InpaintPipeline over `pipe`'s components, loading nothing (diffusers' from_pipe); they share their models. */
  static fromPipe(pipe: StableDiffusion3Pipeline): StableDiffusion3InpaintPipeline {
    return new StableDiffusion3InpaintPipeline(sd3ComponentsOf('StableDiffusion3InpaintPipeline.fromPipe', pipe));
  }

  /** diffusers' StableDiffusion3InpaintPipeline.__call__ (outputType as StableDiffusion3Pipeline.generate; 'png' with paddingMaskCrop). */
  override generate(options: SD3InpaintGenerateOptions & { outputType: 'tensor' | 'latent' }): Promise<GenerateOutput<dt.Tensor>>;
  override generate(options?: SD3InpaintGenerateOptions & { outputType?: 'png' }): Promise<GenerateOutput<Buffer[]>>;
  override generate(options?: SD3InpaintGenerateOptions): Promise<GenerateOutput>;
  override generate(options: SD3InpaintGenerateOptions = {}): Promise<GenerateOutput> {
    return this.generateWith('StableDiffusion3InpaintPipeline.generate', sd3InpaintHooks, options);
  }
}
