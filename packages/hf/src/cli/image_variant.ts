// `dtorch generate --image [--mask]`: the model's image-to-image (or inpainting) variant, over the loaded pipeline's
// components (fromPipe: nothing loads twice), and the size an edit keeps by default: the input
// picture's, rounded down to what the model's patches take (diffusers' get_default_height_width).
import { DTorchError, ErrorCode } from '@dtorch/common';
import { decodeImage } from '../images/image_input.js';
import { VaeImageProcessor } from '../images/vae_image_processor.js';
import type { DiffusionPipeline } from '../pipelines/diffusion_pipeline.js';
import { FluxPipeline } from '../pipelines/flux/flux_pipeline.js';
import { FluxFillPipeline } from '../pipelines/flux/flux_fill_pipeline.js';
import { FluxImg2ImgPipeline } from '../pipelines/flux/flux_img2img_pipeline.js';
import { FluxKontextPipeline } from '../pipelines/flux/flux_kontext_pipeline.js';
import { FluxInpaintPipeline } from '../pipelines/flux/flux_inpaint_pipeline.js';
import { StableDiffusion3Pipeline } from '../pipelines/sd3/sd3_pipeline.js';
import { StableDiffusion3Img2ImgPipeline } from '../pipelines/sd3/sd3_img2img_pipeline.js';
import { StableDiffusion3InpaintPipeline } from '../pipelines/sd3/sd3_inpaint_pipeline.js';

/** An image variant of a family: image to image, or inpainting. */
export type ImageVariant = FluxFillPipeline | FluxKontextPipeline | FluxImg2ImgPipeline | StableDiffusion3Img2ImgPipeline | FluxInpaintPipeline | StableDiffusion3InpaintPipeline;

/** `pipe`'s image-to-image variant (inpainting with `mask`), sharing its models; an error naming the class when it has none. */
export function imageVariant(pipe: DiffusionPipeline, mask: boolean): ImageVariant {
  // a FLUX.1-Fill model is its own variant: it needs the mask
  if (pipe instanceof FluxFillPipeline) {
    if (!mask) throw new DTorchError(ErrorCode.InvalidArgument, '--image: a FLUX.1-Fill model fills where a mask says; give --mask MASK');
    return pipe;
  }
  // a FLUX.1-Kontext model edits the picture it is given (a reference, not a start)
  if (pipe instanceof FluxKontextPipeline) {
    if (mask) throw new DTorchError(ErrorCode.InvalidArgument, '--mask: a FLUX.1-Kontext model edits the whole picture as the prompt says; leave out --mask');
    return pipe;
  }
  if (pipe instanceof FluxPipeline) return mask ? FluxInpaintPipeline.fromPipe(pipe) : FluxImg2ImgPipeline.fromPipe(pipe);
  if (pipe instanceof StableDiffusion3Pipeline) return mask ? StableDiffusion3InpaintPipeline.fromPipe(pipe) : StableDiffusion3Img2ImgPipeline.fromPipe(pipe);
  throw new DTorchError(ErrorCode.InvalidArgument, `--image: ${pipe.constructor.name} has no ${mask ? 'inpainting' : 'image-to-image'} variant; give a Flux or Stable Diffusion 3 model`);
}

/** The picture at `path` (or its bytes)'s size rounded down to multiples of `multiple`: { width, height }. */
export async function imageSize(path: string | Buffer, multiple: number, name = '--image'): Promise<{ width: number; height: number }> {
  const picture = await decodeImage(path, name);
  const [height, width] = new VaeImageProcessor({ vaeScaleFactor: multiple }).getDefaultHeightWidth(picture);
  return { width, height };
}

/** The multiple an image variant's size must be: the VAE's scale factor times the 2x2 patches. */
export function sizeMultiple(pipe: ImageVariant): number {
  return pipe instanceof FluxPipeline ? pipe.vaeScaleFactor * 2 : pipe.vaeScaleFactor * pipe.patchSize;
}
