// PIL's Image.resize for 8-bit images (Pillow's Resample.c), ported so that a resized picture
// equals diffusers' to the byte: a horizontal pass, then a vertical one, each a convolution with
// the filter stretched by the scale when shrinking, its weights normalised and rounded to 22-bit
// fixed point, each pass rounded to 8 bits. libvips' (sharp's) Lanczos differs by a few levels.
import { DTorchError, ErrorCode } from '@dtorch/common';

/** Interleaved 8-bit pixels, row by row. */
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

/** The resampling filters, as diffusers' PIL_INTERPOLATION names them. */
export type Resample = 'lanczos' | 'bicubic' | 'bilinear' | 'linear';
export const resampleNames: readonly Resample[] = ['lanczos', 'bicubic', 'bilinear', 'linear'];

const sinc = (x: number) => (x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x));
const FILTERS: Record<Resample, { support: number; filter: (x: number) => number }> = {
  lanczos: { support: 3, filter: (x) => (x >= -3 && x < 3 ? sinc(x) * sinc(x / 3) : 0) },
  bicubic: {
    support: 2,
    filter: (x) => {
      const a = -0.5;
      x = Math.abs(x);
      if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
      if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
      return 0;
    },
  },
  bilinear: { support: 1, filter: (x) => (x < 0 ? (x > -1 ? 1 + x : 0) : x < 1 ? 1 - x : 0) },
  linear: { support: 1, filter: (x) => (x < 0 ? (x > -1 ? 1 + x : 0) : x < 1 ? 1 - x : 0) },
};

const PRECISION_BITS = 32 - 8 - 2;

interface Coefficients {
  ksize: number;
  bounds: Int32Array; // per output pixel: first input pixel, count
  weights: Int32Array; // ksize per output pixel, fixed point
}

// precompute_coeffs and normalize_coeffs_8bpc: box edges in0, in1 are C floats.
function coefficients(inSize: number, in0: number, in1: number, outSize: number, resample: Resample): Coefficients {
  const { support: baseSupport, filter } = FILTERS[resample];
  const scale = Math.fround(Math.fround(in1) - Math.fround(in0)) / outSize;
  const filterscale = Math.max(scale, 1);
  const support = baseSupport * filterscale;
  const ksize = Math.ceil(support) * 2 + 1;
  const bounds = new Int32Array(outSize * 2);
  const weights = new Int32Array(outSize * ksize);
  const k = new Float64Array(ksize);
  for (let xx = 0; xx < outSize; xx++) {
    const center = Math.fround(in0) + (xx + 0.5) * scale;
    const ss = 1 / filterscale;
    const xmin = Math.max(Math.trunc(center - support + 0.5), 0);
    const xmax = Math.min(Math.trunc(center + support + 0.5), inSize) - xmin;
    let ww = 0;
    k.fill(0);
    for (let x = 0; x < xmax; x++) {
      k[x] = filter((x + xmin - center + 0.5) * ss);
      ww += k[x]!;
    }
    for (let x = 0; x < ksize; x++) {
      const w = x < xmax && ww !== 0 ? k[x]! / ww : k[x]!;
      weights[xx * ksize + x] = w < 0 ? Math.trunc(-0.5 + w * (1 << PRECISION_BITS)) : Math.trunc(0.5 + w * (1 << PRECISION_BITS));
    }
    bounds[xx * 2] = xmin;
    bounds[xx * 2 + 1] = Math.max(xmax, 0);
  }
  return { ksize, bounds, weights };
}

const clip8 = (v: number) => (v >= 1 << (PRECISION_BITS + 8) ? 255 : v <= 0 ? 0 : Math.floor(v / (1 << PRECISION_BITS)));

// One pass along x (stride 1 pixel) or y (stride one row): `out` has `outSize` pixels along the axis.
function pass(src: Pixels, c: Coefficients, horizontal: boolean, outSize: number): Pixels {
  const ch = src.channels;
  const width = horizontal ? outSize : src.width;
  const height = horizontal ? src.height : outSize;
  const out = new Uint8Array(width * height * ch);
  const lines = horizontal ? src.height : src.width;
  const step = horizontal ? ch : src.width * ch; // input stride along the axis
  const lineStep = horizontal ? src.width * ch : ch; // input stride between lines
  const outStep = horizontal ? ch : width * ch;
  const outLineStep = horizontal ? width * ch : ch;
  const half = 1 << (PRECISION_BITS - 1);
  for (let line = 0; line < lines; line++) {
    for (let o = 0; o < outSize; o++) {
      const min = c.bounds[o * 2]!;
      const count = c.bounds[o * 2 + 1]!;
      const base = o * c.ksize;
      for (let k = 0; k < ch; k++) {
        let ss = half;
        let at = line * lineStep + min * step + k;
        for (let i = 0; i < count; i++, at += step) ss += src.data[at]! * c.weights[base + i]!;
        out[line * outLineStep + o * outStep + k] = clip8(ss);
      }
    }
  }
  return { data: out, width, height, channels: ch };
}

/**
 * `image` resized to width x height as PIL's `image.resize((width, height), resample, box)`:
 * `box` [x0, y0, x1, y1] is the source region (default the whole image; it may be empty along
 * an axis, as diffusers' fill mode uses it to stretch an edge). Same size and no box: a copy.
 */
export function pilResize(image: Pixels, width: number, height: number, resample: Resample, box?: readonly [number, number, number, number]): Pixels {
  if (!(resample in FILTERS)) throw new DTorchError(ErrorCode.InvalidArgument, `resample ${JSON.stringify(resample)} is not supported; use one of ${resampleNames.join(', ')}`);
  const [x0, y0, x1, y1] = box ?? [0, 0, image.width, image.height];
  if (width === image.width && height === image.height && x0 === 0 && y0 === 0 && x1 === image.width && y1 === image.height) {
    return { ...image, data: image.data.slice() };
  }
  const needHorizontal = width !== image.width || x0 !== 0 || x1 !== width;
  const needVertical = height !== image.height || y0 !== 0 || y1 !== height;
  let out = image;
  if (needHorizontal) out = pass(out, coefficients(image.width, x0, x1, width, resample), true, width);
  if (needVertical) out = pass(out, coefficients(image.height, y0, y1, height, resample), false, height);
  return out === image ? { ...image, data: image.data.slice() } : out;
}
