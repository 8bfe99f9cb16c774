// What every inpainting variant shares (diffusers' *InpaintPipeline for transformers of the
// latent channels only): image-to-image's start (image_to_image.ts) plus a mask, white where the
// picture is redrawn. The mask is read as diffusers' mask_processor reads it (grey, binarized,
// not normalised), cut to nearest-neighbour latent size; after each step the latents outside it
// are put back to the image's latents noised to the next timestep (the image's own at the last),
// so only the masked part changes. With paddingMaskCrop, the work runs on the mask's bounding
// box (padded, at the call's size, diffusers' get_crop_region and resize_mode "fill"), and each
// PNG is pasted back over the picture (apply_overlay).
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkInteger, invalidParameter } from '@dtorch/common';
import { VaeImageProcessor, type CropBox } from '../../images/vae_image_processor.js';
import type { ImageInput, SingleImageInput } from '../../images/image_input.js';
import type { FlowMatchEulerDiscreteScheduler } from '../../schedulers/flow_match_euler_discrete_scheduler.js';
import { encodePng } from '../image_output.js';
import { checkImageToImage, checkRepeatsTo, loadImage, repeatToBatch, type ImageToImageOptions, type ImageToImageSettings } from './image_to_image.js';

/** The options inpainting adds to a pipeline's generate(). */
export interface InpaintOptions extends ImageToImageOptions {
  /** White where the picture is redrawn, black where it is kept (any input of `image`; grey, binarized at 0.5). */
  maskImage?: ImageInput;
  /**
   * Work on the mask's bounding box padded by this many pixels (at the call's size), then paste
   * the result back over the picture (diffusers' padding_mask_crop; PNG output only).
   */
  paddingMaskCrop?: number;
}

/** An inpainting call's own settings: image-to-image's, the mask, the crop. */
export interface InpaintSettings extends ImageToImageSettings {
  readonly maskInput: ImageInput;
  /** [B, 1, H, W] in {0, 1} after loadInputs. */
  readonly mask?: dt.Tensor;
  readonly paddingMaskCrop: number | undefined;
  /** The box worked on, with paddingMaskCrop. */
  readonly cropsCoords?: CropBox;
}

/** The inpainting options in `options` checked, and the rest for the family's check. */
export function checkInpaint(what: string, options: unknown, defaultStrength = 0.6): { settings: InpaintSettings; rest: Record<string, unknown> } {
  const { settings, rest } = checkImageToImage(what, options, defaultStrength);
  const { maskImage, paddingMaskCrop, ...others } = rest;
  if (maskImage === undefined || maskImage === null) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give maskImage (white where the picture is redrawn, black where it is kept)`);
  if (paddingMaskCrop !== undefined) {
    checkInteger(`${what} paddingMaskCrop`, paddingMaskCrop, 0);
    if (!isPicture(settings.imageInput) || !isPicture(maskImage as ImageInput)) {
      throw new DTorchError(ErrorCode.InvalidArgument, `${what}: paddingMaskCrop takes one picture and one mask (a Buffer, a path or raw pixels), not tensors or lists`);
    }
  }
  return { settings: { ...settings, maskInput: maskImage as ImageInput, paddingMaskCrop: paddingMaskCrop as number | undefined }, rest: others };
}

function isPicture(input: ImageInput): input is Exclude<SingleImageInput, dt.Tensor> {
  return !Array.isArray(input) && !(input instanceof dt.Tensor);
}

/** The picture and the mask read and preprocessed at the call's size (cropped to the mask's box with paddingMaskCrop); pushed onto `owned`. */
export async function loadInpaint(
  what: string,
  settings: InpaintSettings,
  size: { height: number; width: number },
  processor: { vaeScaleFactor: number; latentChannels: number },
  mesh: dt.DeviceMesh,
  owned: dt.Tensor[],
): Promise<InpaintSettings> {
  let crop: { cropsCoords: CropBox; resizeMode: 'fill' } | undefined;
  if (settings.paddingMaskCrop !== undefined) {
    const box = await VaeImageProcessor.getCropRegion(settings.maskInput as Exclude<SingleImageInput, dt.Tensor>, size.width, size.height, settings.paddingMaskCrop);
    crop = { cropsCoords: box, resizeMode: 'fill' };
  }
  const image = await loadImage(what, settings, size, processor, mesh, owned, crop);
  if (image.imageIsLatents) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: inpainting needs the picture (it is masked), not latents`);
  const masks = new VaeImageProcessor({ vaeScaleFactor: processor.vaeScaleFactor, vaeLatentChannels: processor.latentChannels, doNormalize: false, doBinarize: true, doConvertGrayscale: true });
  const mask = await masks.preprocess(settings.maskInput, { height: size.height, width: size.width, ...crop }, { mesh, name: `${what} maskImage` });
  owned.push(mask);
  const [m, i] = [mask.shape, image.image!.shape];
  if (m[2] !== i[2] || m[3] !== i[3] || (m[0] !== i[0] && m[0] !== 1 && i[0] !== 1)) {
    throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: maskImage is ${m[0]} of ${m[3]}x${m[2]} but image ${i[0]} of ${i[3]}x${i[2]} (width x height); give one mask, or one per image`);
  }
  return { ...image, mask, ...(crop && { cropsCoords: crop.cropsCoords }) } as InpaintSettings;
}

/** The mask at the latents' size (nearest, as F.interpolate's default) for a batch of `batch` rows, in `dtype`. */
export function latentMask(what: string, mask: dt.Tensor, batch: number, latentSize: readonly [number, number], dtype: dt.DType): dt.Tensor {
  const rows = mask.shape[0]!;
  checkRepeatsTo(what, rows, batch, 'mask');
  return dt.tidy(() => repeatToBatch(dt.F.interpolate(mask, { size: [latentSize[0], latentSize[1]], mode: 'nearest' }).to(dtype), batch));
}

/** What the blended step needs: the image's latents, the noise, the mask (all as the latents lie), the timesteps run. */
export interface InpaintBlend {
  readonly imageLatents: dt.Tensor;
  readonly noise: dt.Tensor;
  /** 1 where the picture is redrawn. */
  readonly mask: dt.Tensor;
  readonly timesteps: readonly number[];
}

/**
 * diffusers' inpainting step: the scheduler's step, then outside the mask the image's latents
 * noised to the next timestep (scaleNoise at the scheduler's new index), the image's own after
 * the last step.
 */
export function blendedStep(scheduler: FlowMatchEulerDiscreteScheduler, prediction: dt.Tensor, t: number, x: dt.Tensor, blend: InpaintBlend): dt.Tensor {
  const next = scheduler.step(prediction, t, x).prevSample;
  const i = blend.timesteps.indexOf(t);
  const proper = i < blend.timesteps.length - 1 ? scheduler.scaleNoise(blend.imageLatents, blend.timesteps[i + 1]!, blend.noise) : blend.imageLatents;
  return dt.add(dt.mul(dt.sub(1, blend.mask), proper), dt.mul(blend.mask, next));
}

/** With paddingMaskCrop, each PNG of the crop pasted back over the picture where the mask is white (apply_overlay). */
export async function overlayCrops(settings: InpaintSettings, pngs: Buffer[]): Promise<Buffer[]> {
  if (settings.cropsCoords === undefined) return pngs;
  const processor = new VaeImageProcessor();
  const [mask, picture] = [settings.maskInput, settings.imageInput] as Exclude<SingleImageInput, dt.Tensor>[];
  return Promise.all(pngs.map(async (png) => encodePng(await processor.applyOverlay(mask!, picture!, png, settings.cropsCoords))));
}

/** Checks a paddingMaskCrop call's output type: the overlay is on pictures. */
export function checkOverlayOutput(what: string, settings: InpaintSettings, outputType: string): void {
  if (settings.paddingMaskCrop !== undefined && outputType !== 'png') throw invalidParameter(`${what} outputType`, "'png' with paddingMaskCrop (the crop is pasted back over the picture)", outputType);
}
