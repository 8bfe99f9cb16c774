// VaeImageProcessor as diffusers' image_processor.py: pictures in (PNG/JPEG/WebP bytes, paths,
// raw pixels) cropped, resized to multiples of the VAE's scale factor, made grey or kept RGB,
// scaled to [-1, 1] (or binarized to {0, 1} for an inpainting mask) as a tensor [B, C, H, W];
// tensors taken as they are (nearest resize, as diffusers'). Decoding is diffusers' load_image's
// (image_input.ts); resizing and blurring are PIL's, ported (pil_resample.ts, pil_blur.ts), so
// the tensors equal diffusers' (tests/hf/image_processor.test.ts). The output side is
// pipelines/image_output.ts.
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkBoolean, checkInteger, checkKnownOptions, invalidParameter, log } from '@dtorch/common';
import { decodeImage, decodeImages, imageList, type ImageInput, type RgbImage, type SingleImageInput } from './image_input.js';
import { pilGaussianBlur } from './pil_blur.js';
import { pilResize, resampleNames, type Pixels, type Resample } from './pil_resample.js';

/** How {@link VaeImageProcessor.preprocess} fits a picture to the size asked (diffusers' resize_mode). */
export type ResizeMode = 'default' | 'fill' | 'crop';
const resizeModes: readonly ResizeMode[] = ['default', 'fill', 'crop'];

/** A region of a picture, as PIL's crop box: left, top, right, bottom (right and bottom excluded). */
export type CropBox = readonly [x1: number, y1: number, x2: number, y2: number];

/** Options of {@link VaeImageProcessor}, diffusers' arguments camelCase. */
export interface VaeImageProcessorOptions {
  /** Resize to multiples of vaeScaleFactor (or to the height and width asked); default true. */
  doResize?: boolean;
  /** The VAE's downscaling factor (8; 16 for Flux's packed latents); default 8. */
  vaeScaleFactor?: number;
  /** A tensor with this many channels is latents, returned untouched; default 4. */
  vaeLatentChannels?: number;
  /** The resampling filter; default 'lanczos'. */
  resample?: Resample;
  /** Accepted and ignored (PIL's reducing_gap, a speed-up that changes the result slightly); default undefined. */
  reducingGap?: number;
  /** Scale [0, 1] to [-1, 1]; default true. */
  doNormalize?: boolean;
  /** Values below 0.5 to 0, the rest to 1 (an inpainting mask); default false. */
  doBinarize?: boolean;
  /** Pictures as RGB (they are decoded as RGB anyway); default false. */
  doConvertRgb?: boolean;
  /** Pictures as grey (PIL's convert("L")), one channel; default false. */
  doConvertGrayscale?: boolean;
}

/** Options of {@link VaeImageProcessor.preprocess}. */
export interface PreprocessOptions {
  /** Target height; default the first picture's, rounded down to a multiple of vaeScaleFactor. */
  height?: number;
  /** Target width; default the first picture's, rounded down to a multiple of vaeScaleFactor. */
  width?: number;
  /** 'default' stretches; 'fill' fits inside and extends the edges; 'crop' covers and cuts. Pictures only. */
  resizeMode?: ResizeMode;
  /** Crop each picture to this box before resizing (diffusers' crops_coords, from getCropRegion). */
  cropsCoords?: CropBox;
}

/** Where {@link VaeImageProcessor.preprocess} puts its tensor, and what its errors call the input. */
export interface PreprocessTarget {
  /** The mesh of the tensor (the batch replicated on it); default the default mesh. */
  mesh?: dt.DeviceMesh;
  /** The tensor's dtype; default float32. */
  dtype?: dt.DType;
  /** What error messages call the input; default 'image'. */
  name?: string;
}

const OPTIONS = ['doResize', 'vaeScaleFactor', 'vaeLatentChannels', 'resample', 'reducingGap', 'doNormalize', 'doBinarize', 'doConvertRgb', 'doConvertGrayscale'];
const PREPROCESS_OPTIONS = ['height', 'width', 'resizeMode', 'cropsCoords'];

// np.array(image).astype(np.float32) / 255.0, and then 2x - 1: float32 arithmetic, as a table
const unit = Float32Array.from({ length: 256 }, (_, v) => v / 255);
const signed = Float32Array.from(unit, (x) => 2 * x - 1);

/** diffusers' VaeImageProcessor: pictures in, as the VAE's input tensor (see the file's comment). */
export class VaeImageProcessor {
  /** The options with their defaults filled in (diffusers' `processor.config`). */
  readonly config: Readonly<Required<Omit<VaeImageProcessorOptions, 'reducingGap'>> & Pick<VaeImageProcessorOptions, 'reducingGap'>>;

  constructor(options: VaeImageProcessorOptions = {}) {
    const o = checkKnownOptions<VaeImageProcessorOptions>('VaeImageProcessor options', options, OPTIONS);
    const flag = (name: keyof VaeImageProcessorOptions, fallback: boolean) => (o[name] === undefined ? fallback : checkBoolean(`VaeImageProcessor ${name}`, o[name]));
    const resample = o.resample ?? 'lanczos';
    if (!resampleNames.includes(resample)) throw invalidParameter('VaeImageProcessor resample', resampleNames.map((r) => `'${r}'`).join(', '), resample);
    this.config = {
      doResize: flag('doResize', true),
      vaeScaleFactor: checkInteger('VaeImageProcessor vaeScaleFactor', o.vaeScaleFactor ?? 8, 1),
      vaeLatentChannels: checkInteger('VaeImageProcessor vaeLatentChannels', o.vaeLatentChannels ?? 4, 1),
      resample,
      ...(o.reducingGap !== undefined ? { reducingGap: o.reducingGap } : {}),
      doNormalize: flag('doNormalize', true),
      doBinarize: flag('doBinarize', false),
      doConvertRgb: flag('doConvertRgb', false),
      doConvertGrayscale: flag('doConvertGrayscale', false),
    };
    if (this.config.doConvertRgb && this.config.doConvertGrayscale) {
      throw new DTorchError(ErrorCode.InvalidArgument, 'VaeImageProcessor: doConvertRgb and doConvertGrayscale cannot both be true; keep the one for the format you want');
    }
  }

  /**
   * [height, width] of `image` (decoded pixels or a tensor [B, C, H, W]) or the ones given,
   * each rounded down to a multiple of vaeScaleFactor.
   */
  getDefaultHeightWidth(image: { width: number; height: number } | dt.Tensor, height?: number, width?: number): [height: number, width: number] {
    const h = height ?? (image instanceof dt.Tensor ? image.shape[2]! : image.height);
    const w = width ?? (image instanceof dt.Tensor ? image.shape[3]! : image.width);
    checkInteger('height', h, 1);
    checkInteger('width', w, 1);
    const f = this.config.vaeScaleFactor;
    const [rh, rw] = [h - (h % f), w - (w % f)];
    if (rh === 0 || rw === 0) {
      throw new DTorchError(ErrorCode.InvalidArgument, `a size of ${h}x${w} (height x width) rounds down to ${rh}x${rw} at multiples of ${f}; give an image or a size of at least ${f}x${f}`);
    }
    return [rh, rw];
  }

  /**
   * The pictures of `image` (one or a batch) as a float32 tensor [B, C, H, W] on `mesh` (default
   * the default mesh), the batch replicated: C = 3 in [-1, 1], or C = 1 for a grey processor
   * (binarized to {0, 1} for a mask processor). Tensors stay on their mesh; `dtype` casts.
   * `target` is the mesh, or { mesh, dtype, name } (name: what errors call the input).
   */
  async preprocess(image: ImageInput, options: PreprocessOptions = {}, target?: dt.DeviceMesh | PreprocessTarget, dtype?: dt.DType): Promise<dt.Tensor> {
    const o = checkKnownOptions<PreprocessOptions>('preprocess options', options, PREPROCESS_OPTIONS);
    const t = target instanceof dt.DeviceMesh ? { mesh: target } : checkKnownOptions<PreprocessTarget>('preprocess target', target, ['mesh', 'dtype', 'name']);
    const name = t.name ?? 'image';
    dtype = dtype ?? t.dtype ?? 'float32';
    const resizeMode = o.resizeMode ?? 'default';
    if (!resizeModes.includes(resizeMode)) throw invalidParameter('preprocess resizeMode', "'default', 'fill' or 'crop'", resizeMode);
    if (o.height !== undefined) checkInteger('preprocess height', o.height, 1);
    if (o.width !== undefined) checkInteger('preprocess width', o.width, 1);
    const crop = o.cropsCoords === undefined ? undefined : checkBox('preprocess cropsCoords', o.cropsCoords);
    const list = imageList(image, name);
    if (list.every((i) => i instanceof dt.Tensor)) {
      if (resizeMode !== 'default') throw new DTorchError(ErrorCode.InvalidArgument, `preprocess: resizeMode '${resizeMode}' takes pictures, not tensors (as diffusers); resize the tensor first or use 'default'`);
      return this.preprocessTensors(list as dt.Tensor[], o.height, o.width, dtype);
    }
    let pictures: Pixels[] = await decodeImages(list, name);
    if (crop) pictures = pictures.map((p) => cropPixels(p, crop));
    if (this.config.doResize) {
      const [height, width] = this.getDefaultHeightWidth(pictures[0]!, o.height, o.width);
      pictures = pictures.map((p) => this.resize(p, height, width, resizeMode));
    }
    if (this.config.doConvertGrayscale) pictures = pictures.map(toGrey);
    const { width, height, channels } = pictures[0]!;
    for (const [i, p] of pictures.entries()) {
      if (p.width !== width || p.height !== height) {
        throw new DTorchError(ErrorCode.ShapeMismatch, `preprocess: image[${i}] is ${p.height}x${p.width} but image[0] is ${height}x${width} (height x width); with doResize false the pictures of a batch must have one size`);
      }
    }
    const table = this.config.doNormalize ? signed : unit;
    const plane = width * height;
    const values = new Float32Array(pictures.length * channels * plane);
    for (const [b, p] of pictures.entries()) {
      for (let c = 0; c < channels; c++) {
        const base = (b * channels + c) * plane;
        for (let i = 0; i < plane; i++) values[base + i] = table[p.data[i * channels + c]!]!;
      }
    }
    if (this.config.doBinarize) values.forEach((v, i) => (values[i] = v < 0.5 ? 0 : 1));
    const on = t.mesh ?? dt.defaultMesh();
    return dt.tensor(values, { shape: [pictures.length, channels, height, width], dtype, mesh: on, placements: on.shape.map(() => dt.Replicate()) });
  }

  // diffusers' tensor branch: batch joined, latents returned as they are, nearest resize,
  // normalised unless already in [-1, 1] (with diffusers' deprecation warning), binarized.
  private async preprocessTensors(tensors: dt.Tensor[], height: number | undefined, width: number | undefined, dtype: dt.DType): Promise<dt.Tensor> {
    for (const [i, t] of tensors.entries()) {
      if (t.ndim !== 3 && t.ndim !== 4) throw new DTorchError(ErrorCode.ShapeMismatch, `preprocess: image[${i}] is ${t.describe()}; a tensor image is [B, C, H, W] or [C, H, W]`);
      if (t.mesh !== tensors[0]!.mesh) throw new DTorchError(ErrorCode.MeshMismatch, `preprocess: image[${i}] lies on another mesh than image[0]; move them to one mesh`);
    }
    let x = dt.tidy(() => {
      let joined = tensors.length === 1 && tensors[0]!.ndim === 4 ? tensors[0]! : tensors[0]!.ndim === 4 ? dt.cat(tensors, 0) : dt.stack(tensors, 0);
      if (this.config.doConvertGrayscale && tensors.length === 1 && tensors[0]!.ndim === 3) joined = tensors[0]!.unsqueeze(1); // [B, H, W] or [1, H, W]: channels at 1
      return joined === tensors[0] ? joined.clone() : joined;
    });
    if (x.shape[1] === this.config.vaeLatentChannels) return x;
    const step = (f: (t: dt.Tensor) => dt.Tensor) => {
      const next = dt.tidy(() => f(x));
      x.dispose();
      x = next;
    };
    if (x.dtype !== dtype) step((t) => t.to(dtype));
    if (this.config.doResize) {
      const [h, w] = this.getDefaultHeightWidth(x, height, width);
      if (h !== x.shape[2] || w !== x.shape[3]) step((t) => dt.F.interpolate(t, { size: [h, w], mode: 'nearest' }));
    }
    if (this.config.doNormalize) {
      const min = dt.tidy(() => x.min());
      const low = Number(await min.item());
      min.dispose();
      if (low < 0) log.warn(`preprocess: a tensor image in [-1, 1] is taken as it is (diffusers' deprecated form); give tensors in [0, 1]`);
      else step((t) => t.mul(2).sub(1));
    }
    if (this.config.doBinarize) step((t) => t.ge(0.5).to(t.dtype));
    return x;
  }

  /** `image` resized to height x width by the processor's filter, as diffusers' resize of a PIL image. */
  resize(image: Pixels, height: number, width: number, resizeMode: ResizeMode = 'default'): Pixels {
    const resample = this.config.resample;
    if (resizeMode === 'default') return pilResize(image, width, height, resample);
    return resizeMode === 'fill' ? resizeAndFill(image, width, height, resample) : resizeAndCrop(image, width, height, resample);
  }

  /** `image` blurred as diffusers' VaeImageProcessor.blur (PIL's GaussianBlur(blurFactor)), as RGB pixels. */
  static async blur(image: Exclude<SingleImageInput, dt.Tensor>, blurFactor = 4): Promise<RgbImage> {
    const radius = checkNumberAtLeast('blur blurFactor', blurFactor, 0);
    const rgb = await decodeImage(image, 'blur image');
    return pilGaussianBlur(rgb, radius) as RgbImage;
  }

  /**
   * The box [x1, y1, x2, y2] around the mask's non-zero pixels, padded by `pad` and grown to
   * width:height's aspect ratio, as diffusers' get_crop_region (for paddingMaskCrop).
   */
  static async getCropRegion(mask: Exclude<SingleImageInput, dt.Tensor>, width: number, height: number, pad = 0): Promise<[number, number, number, number]> {
    checkInteger('getCropRegion width', width, 1);
    checkInteger('getCropRegion height', height, 1);
    checkInteger('getCropRegion pad', pad, 0);
    return cropRegion(toGrey(await decodeImage(mask, 'getCropRegion mask')), width, height, pad);
  }

  /**
   * The inpainted `image` over `initImage` where `mask` is white, the original elsewhere, as
   * diffusers' apply_overlay; with `cropCoords`, `image` is the crop's and is fitted into it first.
   */
  async applyOverlay(mask: Exclude<SingleImageInput, dt.Tensor>, initImage: Exclude<SingleImageInput, dt.Tensor>, image: Exclude<SingleImageInput, dt.Tensor>, cropCoords?: CropBox): Promise<RgbImage> {
    const box = cropCoords === undefined ? undefined : checkBox('applyOverlay cropCoords', cropCoords);
    const [m, init, inpainted] = await Promise.all([decodeImage(mask, 'applyOverlay mask'), decodeImage(initImage, 'applyOverlay initImage'), decodeImage(image, 'applyOverlay image')]);
    const { width, height } = init;
    if (m.width !== width || m.height !== height) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `applyOverlay: the mask is ${m.height}x${m.width} but the initial image ${height}x${width} (height x width); give them one size`);
    }
    let top: Pixels = inpainted;
    if (box) {
      const [x, y, x2, y2] = box;
      const fitted = this.resize(inpainted, y2 - y, x2 - x, 'crop');
      top = paste({ data: new Uint8Array(width * height * 3), width, height, channels: 3 }, fitted, x, y);
    } else if (top.width !== width || top.height !== height) {
      throw new DTorchError(ErrorCode.ShapeMismatch, `applyOverlay: the image is ${top.height}x${top.width} but the initial image ${height}x${width} (height x width); give cropCoords or images of one size`);
    }
    return overlay(toGrey(m), init, top);
  }
}

function checkNumberAtLeast(name: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) throw invalidParameter(name, `finite number >= ${min}`, value);
  return value;
}

function checkBox(name: string, box: unknown): CropBox {
  if (!Array.isArray(box) || box.length !== 4 || !box.every((v) => Number.isSafeInteger(v))) throw invalidParameter(name, 'box [x1, y1, x2, y2] of integers', box);
  const [x1, y1, x2, y2] = box as number[];
  if (x2! <= x1! || y2! <= y1!) throw invalidParameter(name, 'box [x1, y1, x2, y2] with x2 > x1 and y2 > y1', box);
  return box as unknown as CropBox;
}

// PIL's convert("L") of RGB: L = (19595 R + 38470 G + 7471 B + 2^15) >> 16
function toGrey(p: Pixels): Pixels {
  if (p.channels === 1) return p;
  const n = p.width * p.height;
  const out = new Uint8Array(n);
  const d = p.data;
  for (let i = 0; i < n; i++) out[i] = (d[i * 3]! * 19595 + d[i * 3 + 1]! * 38470 + d[i * 3 + 2]! * 7471 + 0x8000) >> 16;
  return { data: out, width: p.width, height: p.height, channels: 1 };
}

// PIL's crop: the box may reach past the picture, and that part is black.
function cropPixels(p: Pixels, [x1, y1, x2, y2]: CropBox): Pixels {
  const out: Pixels = { data: new Uint8Array((x2 - x1) * (y2 - y1) * p.channels), width: x2 - x1, height: y2 - y1, channels: p.channels };
  return paste(out, p, -x1, -y1);
}

// PIL's paste of `src` into `dst` at (x, y), the part outside `dst` cut off; `dst` changed and returned.
function paste(dst: Pixels, src: Pixels, x: number, y: number): Pixels {
  const ch = dst.channels;
  const x0 = Math.max(x, 0);
  const x1 = Math.min(x + src.width, dst.width);
  if (x1 <= x0) return dst;
  for (let row = Math.max(y, 0); row < Math.min(y + src.height, dst.height); row++) {
    const from = ((row - y) * src.width + (x0 - x)) * ch;
    dst.data.set(src.data.subarray(from, from + (x1 - x0) * ch), (row * dst.width + x0) * ch);
  }
  return dst;
}

const blank = (width: number, height: number, channels: number): Pixels => ({ data: new Uint8Array(width * height * channels), width, height, channels });

// diffusers' _resize_and_fill: fit inside, centre, and stretch the edge rows (or columns) over the
// bands left (by PIL's default filter, bicubic: diffusers passes no resample there).
function resizeAndFill(image: Pixels, width: number, height: number, resample: Resample): Pixels {
  const ratio = width / height;
  const srcRatio = image.width / image.height;
  const srcW = ratio < srcRatio ? width : Math.floor((image.width * height) / image.height);
  const srcH = ratio >= srcRatio ? height : Math.floor((image.height * width) / image.width);
  const resized = pilResize(image, srcW, srcH, resample);
  const res = paste(blank(width, height, image.channels), resized, Math.floor(width / 2) - Math.floor(srcW / 2), Math.floor(height / 2) - Math.floor(srcH / 2));
  if (ratio < srcRatio) {
    const fill = Math.floor(height / 2) - Math.floor(srcH / 2);
    if (fill > 0) {
      paste(res, pilResize(resized, width, fill, 'bicubic', [0, 0, width, 0]), 0, 0);
      paste(res, pilResize(resized, width, fill, 'bicubic', [0, resized.height, width, resized.height]), 0, fill + srcH);
    }
  } else if (ratio > srcRatio) {
    const fill = Math.floor(width / 2) - Math.floor(srcW / 2);
    if (fill > 0) {
      paste(res, pilResize(resized, fill, height, 'bicubic', [0, 0, 0, height]), 0, 0);
      paste(res, pilResize(resized, fill, height, 'bicubic', [resized.width, 0, resized.width, height]), fill + srcW, 0);
    }
  }
  return res;
}

// diffusers' _resize_and_crop: cover, centre, cut what overhangs.
function resizeAndCrop(image: Pixels, width: number, height: number, resample: Resample): Pixels {
  const ratio = width / height;
  const srcRatio = image.width / image.height;
  const srcW = ratio > srcRatio ? width : Math.floor((image.width * height) / image.height);
  const srcH = ratio <= srcRatio ? height : Math.floor((image.height * width) / image.width);
  const resized = pilResize(image, srcW, srcH, resample);
  return paste(blank(width, height, image.channels), resized, Math.floor(width / 2) - Math.floor(srcW / 2), Math.floor(height / 2) - Math.floor(srcH / 2));
}

// diffusers' get_crop_region on grey pixels.
function cropRegion(mask: Pixels, width: number, height: number, pad: number): [number, number, number, number] {
  const { width: w, height: h, data } = mask;
  let [left, right, top, bottom] = [w, -1, h, -1];
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      if (data[y * w + x] === 0) continue;
      left = Math.min(left, x);
      right = Math.max(right, x);
      top = Math.min(top, y);
      bottom = Math.max(bottom, y);
    }
  }
  if (right < 0) throw new DTorchError(ErrorCode.InvalidArgument, 'getCropRegion: the mask is all black (no pixel to inpaint); give a mask with white where to paint');
  let [x1, y1, x2, y2] = [Math.max(left - pad, 0), Math.max(top - pad, 0), Math.min(right + 1 + pad, w), Math.min(bottom + 1 + pad, h)];
  const ratioCrop = (x2 - x1) / (y2 - y1);
  const ratioProcessing = width / height;
  if (ratioCrop > ratioProcessing) {
    const diff = Math.trunc((x2 - x1) / ratioProcessing - (y2 - y1));
    y1 -= Math.floor(diff / 2);
    y2 += diff - Math.floor(diff / 2);
    if (y2 >= h) [y1, y2] = [y1 - (y2 - h), h];
    if (y1 < 0) [y2, y1] = [y2 - y1, 0];
    if (y2 >= h) y2 = h;
  } else {
    const diff = Math.trunc((y2 - y1) * ratioProcessing - (x2 - x1));
    x1 -= Math.floor(diff / 2);
    x2 += diff - Math.floor(diff / 2);
    if (x2 >= w) [x1, x2] = [x1 - (x2 - w), w];
    if (x1 < 0) [x2, x1] = [x2 - x1, 0];
    if (x2 >= w) x2 = w;
  }
  return [x1, y1, x2, y2];
}

// diffusers' apply_overlay in PIL's integer arithmetic: the original, premultiplied and pasted
// through the inverted mask (alpha = 255 - mask), unpremultiplied, then alpha-composited over
// the inpainted picture (opaque), alpha dropped.
function overlay(mask: Pixels, init: Pixels, top: Pixels): RgbImage {
  const n = init.width * init.height;
  const out = new Uint8Array(n * 3);
  const div255 = (a: number) => {
    const t = a + 128;
    return ((t >> 8) + t) >> 8;
  };
  for (let i = 0; i < n; i++) {
    const alpha = 255 - mask.data[i]!;
    if (alpha === 0) {
      for (let c = 0; c < 3; c++) out[i * 3 + c] = top.data[i * 3 + c]!;
      continue;
    }
    // RGBA -> RGBa of an opaque pixel, pasted through `alpha`: DIV255(v * alpha); RGBa -> RGBA
    // alpha_composite over an opaque pixel: outa255 = alpha * 255 + 255 * (255 - alpha) = 255 * 255
    const coef1 = Math.floor((alpha * 255 * 255 * 128) / (255 * 255));
    const coef2 = 255 * 128 - coef1;
    for (let c = 0; c < 3; c++) {
      const pre = div255(init.data[i * 3 + c]! * alpha);
      const src = alpha === 255 ? pre : Math.min(255, Math.floor((255 * pre) / alpha));
      const t = src * coef1 + top.data[i * 3 + c]! * coef2 + (0x80 << 7);
      out[i * 3 + c] = (((t >> 8) + t) >> 8) >> 7;
    }
  }
  return { data: out, width: init.width, height: init.height, channels: 3 };
}

