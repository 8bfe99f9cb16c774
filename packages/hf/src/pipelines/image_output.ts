// What a pipeline returns for its decoded images, as diffusers' VaeImageProcessor.postprocess:
// the VAE's output in [-1, 1] to [0, 1] ((x / 2 + 0.5).clamp(0, 1), in float32), then either that
// tensor or one PNG per image (8-bit RGB, round(x · 255) as diffusers' numpy_to_pil). PNGs are
// written by sharp (libpng, lossless), the library that decodes the pictures coming in
// (images/image_input.ts), so one image library serves both ways.
import * as dt from '@dtorch/api';
import sharp from 'sharp';

/**
 * What generate() returns as `images`: 'png' (PNG files, diffusers' 'pil'), 'tensor'
 * ([B, 3, H, W] float32 in [0, 1]) or 'latent' (the final latents, not decoded).
 */
export type OutputType = 'png' | 'tensor' | 'latent';
/** Every OutputType, for checking a value. */
export const outputTypes: readonly OutputType[] = ['png', 'tensor', 'latent'];

/** The VAE's output [B, 3, H, W] in [-1, 1] as float32 in [0, 1], on its own mesh. */
export function denormalize(decoded: dt.Tensor): dt.Tensor {
  return dt.tidy(() => decoded.to('float32').div(2).add(0.5).clamp(0, 1));
}

/** Images [B, 3, H, W] in [0, 1] as PNG files, one per image. */
export async function toPngs(images: dt.Tensor): Promise<Buffer[]> {
  const [batch, channels, height, width] = images.shape as [number, number, number, number];
  const whole = images.redistribute(images.placements.map(() => dt.Replicate()));
  const data = (await whole.data()) as Float32Array;
  if (whole !== images) whole.dispose();
  const pngs: Buffer[] = [];
  const plane = height * width;
  for (let b = 0; b < batch; b++) {
    const rgb = Buffer.alloc(plane * 3);
    const base = b * channels * plane;
    for (let i = 0; i < plane; i++) {
      for (let c = 0; c < 3; c++) rgb[i * 3 + c] = Math.round(data[base + c * plane + i]! * 255); // as numpy's round (half to even) on these values
    }
    pngs.push(await encodePng({ data: rgb, width, height }));
  }
  return pngs;
}

/** 8-bit RGB pixels (row by row) as a PNG file. */
export function encodePng(image: { data: Uint8Array; width: number; height: number }): Promise<Buffer> {
  return sharp(image.data, { raw: { width: image.width, height: image.height, channels: 3 } }).png().toBuffer();
}

/** The VAE's output [B, 3, H, W] in [-1, 1] as generate() returns it: PNG files or float32 in [0, 1]; frees `decoded`. */
export async function imageOutput(decoded: dt.Tensor, outputType: Exclude<OutputType, 'latent'>): Promise<Buffer[] | dt.Tensor> {
  const images = denormalize(decoded);
  decoded.dispose();
  if (outputType === 'tensor') return images;
  try {
    return await toPngs(images);
  } finally {
    images.dispose();
  }
}
