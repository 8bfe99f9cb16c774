// VaeImageProcessor as diffusers' image_processor.py: pictures in (PNG/JPEG/WebP bytes, paths,
// raw pixels) cropped, resized to multiples of the VAE's scale factor, made grey or kept RGB,
// scaled to [-1, 1] (or binarized to {0, 1} for an inpainting mask) as a tensor [B, C, H, W];
// tensors taken as they are (nearest resize, as diffusers'). Decoding is diffusers' load_image's
// (image_input.ts). Resizing and blurring are sharp's (libvips' Lanczos3 / cubic / linear and its
// Gaussian), which differ from PIL's by a few levels: the tensors equal diffusers' for pictures at
// the target size, and are close to them for resized, filled, cropped or blurred ones
// (tests/hf/image_processor.test.ts). The output side is pipelines/image_output.ts.
import sharp, { type Interpolators, type KernelEnum, type Sharp } from 'sharp';
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkBoolean, checkInteger, checkKnownOptions, invalidParameter, log } from '@dtorch/common';
import { decodeImage, decodeImages, imageList, type ImageInput, type Pixels, type RgbImage, type SingleImageInput } from './image_input.js';

/** The resampling filters, as diffusers' PIL_INTERPOLATION names them. */
export type Resample = 'lanczos' | 'bicubic' | 'bilinear' | 'linear';
interface Filter {
  /** sharp's kernel for shrinking (its cubic is Catmull-Rom, a = -0.5: PIL's bicubic). */
  kernel: KernelEnum[keyof KernelEnum];
  /** sharp's interpolator for enlarging (it has no Lanczos one: bicubic stands in for it). */
  interpolator: Interpolators[keyof Interpolators];
}
const FILTERS: Record<Resample, Filter> = {
  lanczos: { kernel: 'lanczos3', interpolator: 'bicubic' },
  bicubic: { kernel: 'cubic', interpolator: 'bicubic' },
  bilinear: { kernel: 'linear', interpolator: 'bilinear' },
  linear: { kernel: 'linear', interpolator: 'bilinear' },
};
const resampleNames = Object.keys(FILTERS) as Resample[];

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
    if (crop) pictures = await Promise.all(pictures.map((p) => place(p, crop[2] - crop[0], crop[3] - crop[1], -crop[0], -crop[1])));
    if (this.config.doResize) {
      const [height, width] = this.getDefaultHeightWidth(pictures[0]!, o.height, o.width);
      pictures = await Promise.all(pictures.map((p) => this.resize(p, height, width, resizeMode)));
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

  /**
   * `image` resized to height x width by the processor's filter, as diffusers' resize of a PIL
   * image, the resampling sharp's (a few levels from PIL's); at its own size, a copy.
   */
  async resize(image: Pixels, height: number, width: number, resizeMode: ResizeMode = 'default'): Promise<Pixels> {
    const filter = FILTERS[this.config.resample];
    if (resizeMode === 'default') return stretch(image, width, height, filter);
    return resizeMode === 'fill' ? resizeAndFill(image, width, height, filter) : resizeAndCrop(image, width, height, filter);
  }

  /**
   * `image` blurred as diffusers' VaeImageProcessor.blur (PIL's GaussianBlur(blurFactor), whose
   * radius is the Gaussian's sigma), by sharp's Gaussian: a few levels from PIL's box
   * approximation. 0 is no blur; sharp's smallest sigma is 0.3, so (0, 0.3) blurs as 0.3.
   */
  static async blur(image: Exclude<SingleImageInput, dt.Tensor>, blurFactor = 4): Promise<RgbImage> {
    const sigma = checkNumberAtLeast('blur blurFactor', blurFactor, 0);
    const rgb = await decodeImage(image, 'blur image');
    if (sigma === 0) return rgb;
    // minAmplitude: the kernel cut where it falls under 1/1000 of its peak (sharp's default, 0.2, cuts it at 1.8 sigma)
    return (await pixels(pipeline(rgb).blur({ sigma: Math.min(Math.max(sigma, 0.3), 1000), minAmplitude: 0.001 }), 3)) as RgbImage;
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
      top = await place(await this.resize(inpainted, y2 - y, x2 - x, 'crop'), width, height, x, y);
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

// sharp's pipeline on raw pixels, and its output as pixels of as many channels (grey stays grey)
const pipeline = (p: Pixels) => sharp(p.data, { raw: { width: p.width, height: p.height, channels: p.channels as 1 | 3 | 4 } });

async function pixels(s: Sharp, channels: number): Promise<Pixels> {
  const { data, info } = await (channels === 1 ? s.toColourspace('b-w') : s).raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  if (info.channels !== channels) throw new DTorchError(ErrorCode.Internal, `sharp gave ${info.channels} channels where ${channels} went in`);
  return { data: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height, channels };
}

const copy = (p: Pixels): Pixels => ({ ...p, data: p.data.slice() });

// `image` stretched to width x height, as PIL's resize (the aspect ratio let go, pixel centres
// mapped onto pixel centres). An axis that shrinks goes through sharp's resize (libvips' reduce);
// one that grows through sharp's affine with PIL's centre convention, input x = (x' + 0.5) / scale
// - 0.5, over edges extended by copy as PIL's are: libvips' own upsizing samples about half a
// pixel off PIL's, tens of levels on a detailed picture.
async function stretch(image: Pixels, width: number, height: number, { kernel, interpolator }: Filter): Promise<Pixels> {
  const [w, h] = [Math.min(width, image.width), Math.min(height, image.height)];
  let p = w === image.width && h === image.height ? copy(image) : await pixels(pipeline(image).resize(w, h, { kernel, fit: 'fill' }), image.channels);
  if (w === width && h === height) return p;
  const pad = 3; // the bicubic interpolator's reach, and some
  p = await pixels(pipeline(p).extend({ top: pad, bottom: pad, left: pad, right: pad, extendWith: 'copy' }), p.channels);
  const [sx, sy] = [width / w, height / h];
  const grown = await pixels(pipeline(p).affine([sx, 0, 0, sy], { idx: 0.5 - pad, idy: 0.5 - pad, odx: -0.5, ody: -0.5, interpolator }), p.channels);
  if (grown.width < width || grown.height < height) throw new DTorchError(ErrorCode.Internal, `sharp's affine gave ${grown.height}x${grown.width} where at least ${height}x${width} was asked`);
  return place(grown, width, height, 0, 0);
}

const BLACK = { r: 0, g: 0, b: 0, alpha: 1 };

// PIL's paste of `image` at (left, top) into a black width x height picture, the part outside cut
// off: as PIL's crop where the box reaches past the picture, and for diffusers' crop mode.
async function place(image: Pixels, width: number, height: number, left: number, top: number): Promise<Pixels> {
  const [x0, y0] = [Math.max(left, 0), Math.max(top, 0)];
  const [x1, y1] = [Math.min(left + image.width, width), Math.min(top + image.height, height)];
  if (x1 <= x0 || y1 <= y0) return { data: new Uint8Array(width * height * image.channels), width, height, channels: image.channels };
  if (x0 === left && y0 === top && x1 - x0 === image.width && y1 - y0 === image.height && image.width === width && image.height === height) return copy(image);
  let s = pipeline(image);
  if (x1 - x0 !== image.width || y1 - y0 !== image.height) s = s.extract({ left: x0 - left, top: y0 - top, width: x1 - x0, height: y1 - y0 });
  if (x1 - x0 !== width || y1 - y0 !== height) s = s.extend({ left: x0, top: y0, right: width - x1, bottom: height - y1, background: BLACK });
  return pixels(s, image.channels);
}

// diffusers' _resize_and_fill: fit inside and centre; diffusers stretches the edge row (or
// column) over each band left (a PIL resize of a box of no height, 1.125 x the edge - 0.125 x
// the next), here the edge repeated (sharp's 'copy' extension). As diffusers', no band when the
// top one would be empty, and a row or column the bands do not reach (an odd size) stays black.
async function resizeAndFill(image: Pixels, width: number, height: number, filter: Filter): Promise<Pixels> {
  const ratio = width / height;
  const srcRatio = image.width / image.height;
  const srcW = ratio < srcRatio ? width : Math.floor((image.width * height) / image.height);
  const srcH = ratio >= srcRatio ? height : Math.floor((image.height * width) / image.width);
  const [x, y] = [Math.floor(width / 2) - Math.floor(srcW / 2), Math.floor(height / 2) - Math.floor(srcH / 2)];
  const resized = await stretch(image, srcW, srcH, filter);
  if (ratio < srcRatio && y > 0) {
    const banded = await pixels(pipeline(resized).extend({ top: y, bottom: Math.min(y, height - y - srcH), extendWith: 'copy' }), resized.channels);
    return place(banded, width, height, x, 0);
  }
  if (ratio > srcRatio && x > 0) {
    const banded = await pixels(pipeline(resized).extend({ left: x, right: Math.min(x, width - x - srcW), extendWith: 'copy' }), resized.channels);
    return place(banded, width, height, 0, y);
  }
  return place(resized, width, height, x, y);
}

// diffusers' _resize_and_crop: cover, centre, cut what overhangs.
async function resizeAndCrop(image: Pixels, width: number, height: number, filter: Filter): Promise<Pixels> {
  const ratio = width / height;
  const srcRatio = image.width / image.height;
  const srcW = ratio > srcRatio ? width : Math.floor((image.width * height) / image.height);
  const srcH = ratio <= srcRatio ? height : Math.floor((image.height * width) / image.width);
  const resized = await stretch(image, srcW, srcH, filter);
  return place(resized, width, height, Math.floor(width / 2) - Math.floor(srcW / 2), Math.floor(height / 2) - Math.floor(srcH / 2));
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

