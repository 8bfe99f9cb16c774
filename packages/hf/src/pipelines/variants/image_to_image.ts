// What every image-to-image variant shares (diffusers' *Img2ImgPipeline, and the inpainting
// ones after it): the image option read and preprocessed as diffusers' VaeImageProcessor, the
// schedule cut by `strength` (get_timesteps: the last strength × steps of it, the scheduler's
// begin index at the first kept), the image's latents (the VAE's sample from the call's
// generator, shifted and scaled; or the caller's latents as given) repeated to the batch, and the
// start latents noised to the first kept timestep (scale_noise). One dt.Generator per call draws
// the VAE's sample and then the noise, in diffusers' order, so a seed gives diffusers' image.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkInteger, invalidParameter } from '@dtorch/common';
import { VaeImageProcessor, type CropBox, type ResizeMode } from '../../images/vae_image_processor.js';
import type { ImageInput } from '../../images/image_input.js';
import type { AutoencoderKL } from '../../models/autoencoder_kl/autoencoder_kl.js';
import type { FlowMatchEulerDiscreteScheduler } from '../../schedulers/flow_match_euler_discrete_scheduler.js';

/** The options image-to-image adds to a pipeline's generate(). */
export interface ImageToImageOptions {
  /**
   * The image to start from: a PNG/JPEG/WebP Buffer or file path, raw pixels, a [B, 3, H, W]
   * tensor in [0, 1], or a list of them (one per prompt, or one for all); resized to
   * height x width. A tensor of the VAE's latent channels is taken as latents as they are.
   */
  image?: ImageInput;
  /**
   * How much of the schedule runs, in [0, 1] (default 0.6): 1 starts from noise and ignores the
   * image's content, small values keep it; the image is noised to the first step kept.
   */
  strength?: number;
}

/** An image-to-image call's own settings: the image (as given until loadInputs, then on the devices) and strength. */
export interface ImageToImageSettings {
  /** The image as given, before loadInputs. */
  readonly imageInput: ImageInput;
  /** [B, 3, H, W] in [-1, 1] (or [B, latentChannels, h, w] latents given as the image), after loadInputs. */
  readonly image?: dt.Tensor;
  /** Whether `image` holds latents (the caller's), not pixels. */
  readonly imageIsLatents?: boolean;
  readonly strength: number;
}

/** The image-to-image options in `options` checked (strength default `defaultStrength`), and the rest for the family's check. */
export function checkImageToImage(what: string, options: unknown, defaultStrength = 0.6): { settings: ImageToImageSettings; rest: Record<string, unknown> } {
  if (options === null || typeof options !== 'object') throw invalidParameter(`${what} options`, 'an object', options);
  const { image, strength, ...rest } = options as Record<string, unknown>;
  if (image === undefined || image === null) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: give image (a PNG/JPEG/WebP Buffer or path, raw pixels, or a [B, 3, H, W] tensor in [0, 1]) to start from`);
  const s = strength ?? defaultStrength;
  if (typeof s !== 'number' || !(s >= 0 && s <= 1)) throw invalidParameter(`${what} strength`, 'a number in [0, 1]', strength);
  return { settings: { imageInput: image as ImageInput, strength: s }, rest };
}

/**
 * The call's image read and preprocessed (VaeImageProcessor with `vaeScaleFactor`): [B, 3, H, W]
 * float32 in [-1, 1] at height x width (of the crop box, resized as `crop.resizeMode`, when given),
 * whole on `mesh`; a tensor with the VAE's latent channels passes as latents. Pushed onto `owned`.
 */
export async function loadImage(
  what: string,
  settings: ImageToImageSettings,
  size: { height: number; width: number },
  processor: { vaeScaleFactor: number; latentChannels: number },
  mesh: dt.DeviceMesh,
  owned: dt.Tensor[],
  crop?: { cropsCoords: CropBox; resizeMode: ResizeMode },
): Promise<ImageToImageSettings> {
  const input = settings.imageInput;
  if (input instanceof dt.Tensor && input.ndim === 4 && input.shape[1] === processor.latentChannels) {
    return { ...settings, image: input, imageIsLatents: true };
  }
  const vae = new VaeImageProcessor({ vaeScaleFactor: processor.vaeScaleFactor, vaeLatentChannels: processor.latentChannels });
  const image = await vae.preprocess(input, { height: size.height, width: size.width, ...crop }, { mesh, name: `${what} image` });
  owned.push(image);
  return { ...settings, image };
}

/**
 * diffusers' get_timesteps: of the schedule just set, the last min(steps × strength, steps)
 * steps, the scheduler's begin index at the first of them; an error when none is left.
 */
export function strengthTimesteps(what: string, scheduler: FlowMatchEulerDiscreteScheduler, strength: number): readonly number[] {
  const all = scheduler.timesteps;
  const steps = all.length;
  const initTimestep = Math.min(steps * strength, steps);
  const tStart = Math.trunc(Math.max(steps - initTimestep, 0));
  if (steps - tStart < 1) {
    throw new DTorchError(ErrorCode.InvalidArgument, `${what}: strength ${strength} of ${steps} steps leaves ${steps - tStart} steps to run; raise strength or numInferenceSteps (at least one step must run)`);
  }
  scheduler.setBeginIndex(tStart);
  return all.slice(tStart);
}

/**
 * The image's latents for a batch of `batch` rows (latentSize: their height and width), on the VAE's mesh in `dtype`: the VAE's
 * sample (from `generator`), (x − shift) × scale; latents given as the image as they are. A
 * smaller batch of images is repeated whole (torch.cat([latents] * k)), as diffusers does.
 */
export function imageLatents(what: string, vae: AutoencoderKL, settings: ImageToImageSettings, batch: number, latentSize: readonly [number, number], generator: dt.Generator, dtype: dt.DType): dt.Tensor {
  const image = settings.image!;
  const rows = image.shape[0]!;
  if (settings.imageIsLatents && (image.shape[2] !== latentSize[0] || image.shape[3] !== latentSize[1])) {
    throw new DTorchError(ErrorCode.ShapeMismatch, `${what}: latents given as image must be [batch, ${vae.config.latentChannels}, ${latentSize[0]}, ${latentSize[1]}] for this height and width, got ${image.describe()}`);
  }
  checkRepeatsTo(what, rows, batch, 'image');
  return dt.tidy(() => {
    let latents: dt.Tensor;
    if (settings.imageIsLatents) {
      latents = image.to(dtype);
    } else {
      const pixels = image.mesh.equals(vae.mesh) ? image : image.redistribute(vae.mesh, vae.mesh.shape.map(() => dt.Replicate()));
      const sample = vae.encode(pixels.to(vae.dtype)).sample(generator);
      latents = sample.sub(vae.shiftFactor ?? 0).mul(vae.scalingFactor).to(dtype);
    }
    return repeatToBatch(latents, batch);
  });
}

/** An error unless `rows` images (or masks) repeat whole to a batch of `batch` rows, as diffusers repeats them. */
export function checkRepeatsTo(what: string, rows: number, batch: number, noun: 'image' | 'mask'): void {
  if (batch % rows !== 0) {
    throw new DTorchError(ErrorCode.InvalidArgument, `${what}: ${rows} ${noun}s cannot be repeated to a batch of ${batch} (prompts x numImagesPerPrompt); give one ${noun}, or one per prompt`);
  }
}

/** `t` (batch first) repeated whole to `batch` rows: torch.cat([t] * k), as diffusers repeats images, latents and masks. */
export function repeatToBatch(t: dt.Tensor, batch: number): dt.Tensor {
  const rows = t.shape[0]!;
  return rows === batch ? t : dt.cat(Array.from({ length: batch / rows }, () => t), 0);
}

/** The call's generator: seeded with `seed`, or with the next of dt.manualSeed's sequence. */
export function callGenerator(what: string, seed: unknown): dt.Generator {
  if (seed !== undefined) checkInteger(`${what} seed`, seed, 0, 2 ** 48 - 1);
  return new dt.Generator(seed as number | undefined);
}
