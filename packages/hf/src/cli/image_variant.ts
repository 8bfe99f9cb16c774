// `dtorch generate --image`: the model's image-to-image variant, over the loaded pipeline's
// components (fromPipe: nothing loads twice), and the size an edit keeps by default: the input
// picture's, rounded down to what the model's patches take (diffusers' get_default_height_width).
import { DTorchError, ErrorCode } from '@dtorch/common';
import { decodeImage } from '../images/image_input.js';
import { VaeImageProcessor } from '../images/vae_image_processor.js';
import type { DiffusionPipeline } from '../pipelines/diffusion_pipeline.js';
import { FluxPipeline } from '../pipelines/flux/flux_pipeline.js';
import { FluxImg2ImgPipeline } from '../pipelines/flux/flux_img2img_pipeline.js';
import { StableDiffusion3Pipeline } from '../pipelines/sd3/sd3_pipeline.js';
import { StableDiffusion3Img2ImgPipeline } from '../pipelines/sd3/sd3_img2img_pipeline.js';

/** `pipe`'s image-to-image variant, sharing its models; an error naming the class when it has none. */
export function imageToImageVariant(pipe: DiffusionPipeline): FluxImg2ImgPipeline | StableDiffusion3Img2ImgPipeline {
  if (pipe instanceof FluxImg2ImgPipeline || pipe instanceof StableDiffusion3Img2ImgPipeline) return pipe;
  if (pipe instanceof FluxPipeline) return FluxImg2ImgPipeline.fromPipe(pipe);
  if (pipe instanceof StableDiffusion3Pipeline) return StableDiffusion3Img2ImgPipeline.fromPipe(pipe);
  throw new DTorchError(ErrorCode.InvalidArgument, `--image: ${pipe.constructor.name} has no image-to-image variant; give a Flux or Stable Diffusion 3 model`);
}

/** The picture at `path`'s size rounded down to multiples of `multiple`: { width, height }. */
export async function imageSize(path: string, multiple: number): Promise<{ width: number; height: number }> {
  const picture = await decodeImage(path, '--image');
  const [height, width] = new VaeImageProcessor({ vaeScaleFactor: multiple }).getDefaultHeightWidth(picture);
  return { width, height };
}

/** The multiple an image-to-image pipeline's size must be: the VAE's scale factor times the 2x2 patches. */
export function sizeMultiple(pipe: FluxImg2ImgPipeline | StableDiffusion3Img2ImgPipeline): number {
  return pipe instanceof FluxImg2ImgPipeline ? pipe.vaeScaleFactor * 2 : pipe.vaeScaleFactor * pipe.patchSize;
}
