// Images in: what an image-to-image or inpainting pipeline takes as a picture, decoded to 8-bit
// RGB pixels as diffusers' load_image gives them (PIL's exif_transpose, then convert("RGB")).
// sharp (libvips) decodes: PNG, JPEG, WebP, GIF, TIFF, AVIF. Checked against PIL
// (tools/reference/make_image_processor_fixtures.py): 8- and 16-bit RGB, RGBA, grey + alpha,
// palette PNGs, JPEG and WebP decode to PIL's very bytes; CMYK JPEGs too, converted here with
// PIL's own formula (sharp would use an ICC profile). One difference: a 16-bit grey PNG gives the
// high byte of each value, as PIL does for 16-bit RGB, where PIL's convert("RGB") clips it to 255.
import { readFile, stat } from 'node:fs/promises';
import sharp from 'sharp';
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode, checkInteger, invalidParameter } from '@dtorch/common';

/**
 * Raw 8-bit pixels, row by row, channels interleaved (as canvas ImageData holds them with
 * `channels: 4`): grey (1), RGB (3) or RGBA (4). Alpha is dropped, as PIL's convert("RGB") drops it.
 */
export interface RawPixels {
  /** width × height × channels bytes, row by row, a pixel's channels together. */
  data: Uint8Array | Uint8ClampedArray;
  /** Pixels per row. */
  width: number;
  /** Rows. */
  height: number;
  /** Values per pixel: 1 grey, 3 RGB, 4 RGBA. */
  channels: 1 | 3 | 4;
}

/** A decoded picture: 8-bit RGB, row by row ([height, width, 3] as numpy's np.array(image)). */
export interface RgbImage {
  /** width × height × 3 bytes, row by row, R, G, B together. */
  data: Uint8Array;
  /** Pixels per row. */
  width: number;
  /** Rows. */
  height: number;
  /** Always 3 (R, G, B). */
  channels: 3;
}

/** Interleaved 8-bit pixels, row by row, as the image processor works on them (RGB, or grey after convert("L")). */
export interface Pixels {
  /** width × height × channels bytes, row by row, a pixel's channels together. */
  data: Uint8Array;
  /** Pixels per row. */
  width: number;
  /** Rows. */
  height: number;
  /** Values per pixel (1 grey, 3 RGB). */
  channels: number;
}

/**
 * One picture: an encoded file's bytes (PNG, JPEG, WebP, ...), a path to such a file, raw
 * pixels, or a tensor [B, C, H, W] or [C, H, W] in [0, 1] (taken as it is, as diffusers takes tensors).
 */
export type SingleImageInput = Buffer | Uint8Array | string | RawPixels | dt.Tensor;

/** A picture or a batch of them (an array), as diffusers' PipelineImageInput. */
export type ImageInput = SingleImageInput | readonly SingleImageInput[];

const ACCEPTED = 'PNG/JPEG/WebP bytes (Buffer or Uint8Array), a file path, raw pixels { data, width, height, channels } or a dt.Tensor';

/** Whether `value` is raw pixels' shape of object (checked further when decoded). */
export function isRawPixels(value: unknown): value is RawPixels {
  return typeof value === 'object' && value !== null && !ArrayBuffer.isView(value) && 'data' in value && 'width' in value && 'height' in value;
}

/** The inputs of a batch as a list (one picture is a batch of one); an empty batch is refused. */
export function imageList(image: ImageInput, name = 'image'): SingleImageInput[] {
  const list = Array.isArray(image) ? [...(image as readonly SingleImageInput[])] : [image as SingleImageInput];
  if (list.length === 0) throw new DTorchError(ErrorCode.InvalidArgument, `${name}: the batch is empty; give at least one image`);
  return list;
}

/** Decodes one picture that is not a tensor (file bytes, a path or raw pixels) to 8-bit RGB. */
export async function decodeImage(input: Exclude<SingleImageInput, dt.Tensor>, name = 'image'): Promise<RgbImage> {
  if (typeof input === 'string') return decodeFile(input, name);
  if (input instanceof Uint8Array) return decodeBytes(input, `${name} (${input.length} bytes)`);
  if (isRawPixels(input)) return fromRaw(input, name);
  throw invalidParameter(name, ACCEPTED, input);
}

/** Decodes each picture of a batch that holds no tensor. */
export async function decodeImages(images: readonly SingleImageInput[], name = 'image'): Promise<RgbImage[]> {
  return Promise.all(
    images.map((image, i) => {
      const what = images.length > 1 ? `${name}[${i}]` : name;
      if (image instanceof dt.Tensor) throw new DTorchError(ErrorCode.InvalidArgument, `${what}: a batch mixes tensors and pictures; give all tensors or none`);
      return decodeImage(image, what);
    }),
  );
}

async function decodeFile(path: string, name: string): Promise<RgbImage> {
  if (path === '') throw invalidParameter(name, ACCEPTED, path);
  const info = await stat(path).catch(() => undefined);
  if (!info) throw new DTorchError(ErrorCode.NotFound, `${name}: no file at ${JSON.stringify(path)}; give the path of a PNG, JPEG or WebP file, or the file's bytes`);
  if (!info.isFile()) throw new DTorchError(ErrorCode.InvalidArgument, `${name}: ${JSON.stringify(path)} is not a file; give the path of a PNG, JPEG or WebP file`);
  return decodeBytes(await readFile(path), JSON.stringify(path));
}

// sharp's pipeline to PIL's RGB: EXIF orientation applied (load_image's exif_transpose), the
// embedded ICC profile ignored (PIL ignores it), alpha dropped, grey and palette expanded, 16
// bits cut to their high byte. CMYK is read as CMYK and converted below.
async function decodeBytes(bytes: Uint8Array, what: string): Promise<RgbImage> {
  if (bytes.length === 0) throw new DTorchError(ErrorCode.InvalidArgument, `${what} is empty (0 bytes): give a PNG, JPEG or WebP file's contents`);
  try {
    const meta = await sharp(bytes).metadata();
    if (meta.space === 'cmyk') return await decodeCmyk(bytes);
    const { data, info } = await sharp(bytes, { ignoreIcc: true }).autoOrient().removeAlpha().toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new DTorchError(ErrorCode.Internal, `decoding gave ${info.channels} channels where RGB was expected`);
    return { data: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height, channels: 3 };
  } catch (err) {
    if (err instanceof DTorchError) throw err;
    throw badImage(what, bytes, (err as Error).message);
  }
}

// One message for bytes sharp cannot read: what they look like, and what to give instead.
function badImage(what: string, bytes: Uint8Array, reason: string): DTorchError {
  const looksLike = /unsupported image format/.test(reason)
    ? 'is not an image sharp can read (PNG, JPEG, WebP, GIF, TIFF, AVIF)'
    : /pixel limit/.test(reason)
      ? `is larger than sharp's limit of ${0x3fff * 0x3fff} pixels`
      : `could not be decoded (${reason.trim().replace(/:$/, '')}): the file is truncated or corrupt`;
  const head = Buffer.from(bytes.subarray(0, 8)).toString('hex');
  return new DTorchError(ErrorCode.BadFile, `${what} ${looksLike}; its first bytes are ${head}. Re-export or re-download the image, or pass raw pixels { data, width, height, channels }`);
}

// PIL's cmyk2rgb (Convert.c): R = (255 - K) - C * (255 - K) / 255 with its rounding
// (MULDIV255), on the CMYK values as PIL reads them (Adobe-inverted files inverted back).
async function decodeCmyk(bytes: Uint8Array): Promise<RgbImage> {
  const { data, info } = await sharp(bytes).autoOrient().pipelineColourspace('cmyk').toColourspace('cmyk').raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  const n = info.width * info.height;
  const rgb = new Uint8Array(n * 3);
  for (let i = 0; i < n; i++) {
    const nk = 255 - data[i * 4 + 3]!;
    for (let c = 0; c < 3; c++) {
      const t = data[i * 4 + c]! * nk + 128;
      rgb[i * 3 + c] = Math.min(255, Math.max(0, nk - (((t >> 8) + t) >> 8)));
    }
  }
  return { data: rgb, width: info.width, height: info.height, channels: 3 };
}

// Raw pixels checked (positive integer sizes, a known channel count, data of the right length), then as RGB.
function fromRaw(raw: RawPixels, name: string): RgbImage {
  const width = checkInteger(`${name}.width`, raw.width, 0);
  const height = checkInteger(`${name}.height`, raw.height, 0);
  if (width === 0 || height === 0) throw new DTorchError(ErrorCode.InvalidArgument, `${name}: raw pixels of size ${width}x${height} (width x height) hold no pixel; give a width and height of at least 1`);
  if (raw.channels !== 1 && raw.channels !== 3 && raw.channels !== 4) {
    throw invalidParameter(`${name}.channels`, '1 (grey), 3 (RGB) or 4 (RGBA)', raw.channels);
  }
  if (!(raw.data instanceof Uint8Array || raw.data instanceof Uint8ClampedArray)) {
    throw invalidParameter(`${name}.data`, 'Uint8Array or Uint8ClampedArray of 8-bit values', raw.data);
  }
  const n = width * height;
  if (raw.data.length !== n * raw.channels) {
    throw new DTorchError(
      ErrorCode.ShapeMismatch,
      `${name}: raw pixels of ${width}x${height} with ${raw.channels} channels need ${n * raw.channels} bytes, but data has ${raw.data.length}; check width, height and channels (canvas ImageData has 4)`,
    );
  }
  const rgb = new Uint8Array(n * 3);
  const src = raw.data;
  const k = raw.channels;
  for (let i = 0; i < n; i++) {
    if (k === 1) rgb.fill(src[i]!, i * 3, i * 3 + 3);
    else for (let c = 0; c < 3; c++) rgb[i * 3 + c] = src[i * k + c]!;
  }
  return { data: rgb, width, height, channels: 3 };
}
