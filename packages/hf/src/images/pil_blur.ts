// PIL's ImageFilter.GaussianBlur for 8-bit images (Pillow's BoxBlur.c), ported so that a blurred
// mask equals diffusers' to the byte: not a true Gaussian but three passes of a box blur whose
// fractional radius gives the Gaussian's variance (Gwosdek et al., "Theoretical foundations of
// Gaussian convolution by extended box filtering"), in 24-bit fixed point, rounded to 8 bits
// after each pass, edges extended. libvips' (sharp's) blur is a sampled Gaussian: close, not equal.
import type { Pixels } from './pil_resample.js';

const f = Math.fround; // the C code's `float` arithmetic

// ImagingGaussianBlur: the extended box radius of a Gaussian of `radius` (PIL's sigma) over `passes`.
function boxRadius(radius: number, passes: number): number {
  const sigma2 = f(f(f(radius) * f(radius)) / passes);
  const L = f(Math.sqrt(12.0 * sigma2 + 1.0));
  const l = f(Math.floor((L - 1.0) / 2.0));
  let a = f(f(f(2 * l) + 1) * f(f(l * f(l + 1)) - f(3 * sigma2)));
  a = f(a / f(6 * f(sigma2 - f(f(l + 1) * f(l + 1)))));
  return f(l + a);
}

// ImagingLineBoxBlur: one line of `n` values at `at`, `step` apart, blurred in place.
function blurLine(data: Uint8Array, at: number, step: number, n: number, radius: number, ww: number, fw: number, line: Float64Array): void {
  for (let i = 0; i < n; i++) line[i] = data[at + i * step]!;
  const px = (i: number) => line[i]!;
  const lastx = n - 1;
  const edgeA = Math.min(radius + 1, n);
  const edgeB = Math.max(n - radius - 1, 0);
  // the sum for the pixel before the first: the first pixel radius + 1 times, then pixels up to radius - 1
  let acc = px(0) * (radius + 1);
  for (let x = 0; x < edgeA - 1; x++) acc += px(x);
  acc += px(lastx) * (radius - edgeA + 1);
  const save = (x: number, left: number, right: number) => {
    const bulk = acc * ww + (px(left) + px(right)) * fw;
    data[at + x * step] = Math.floor((bulk + (1 << 23)) / (1 << 24));
  };
  if (edgeA <= edgeB) {
    for (let x = 0; x < edgeA; x++) {
      acc += px(x + radius) - px(0);
      save(x, 0, x + radius + 1);
    }
    for (let x = edgeA; x < edgeB; x++) {
      acc += px(x + radius) - px(x - radius - 1);
      save(x, x - radius - 1, x + radius + 1);
    }
    for (let x = edgeB; x <= lastx; x++) {
      acc += px(lastx) - px(x - radius - 1);
      save(x, x - radius - 1, lastx);
    }
  } else {
    for (let x = 0; x < edgeB; x++) {
      acc += px(x + radius) - px(0);
      save(x, 0, lastx);
    }
    for (let x = edgeB; x < edgeA; x++) {
      acc += px(lastx) - px(0);
      save(x, 0, lastx);
    }
    for (let x = edgeA; x <= lastx; x++) {
      acc += px(lastx) - px(x - radius - 1);
      save(x, x - radius - 1, lastx);
    }
  }
}

// ImagingHorizontalBoxBlur along x or y, every channel of every line.
function boxBlur(image: Pixels, floatRadius: number, horizontal: boolean): void {
  const radius = Math.trunc(floatRadius);
  const ww = Math.trunc(f((1 << 24) / f(f(floatRadius * 2) + 1)));
  const fw = Math.trunc(((1 << 24) - (radius * 2 + 1) * ww) / 2);
  const { width, height, channels } = image;
  const [n, lines] = horizontal ? [width, height] : [height, width];
  const step = horizontal ? channels : width * channels;
  const lineStep = horizontal ? width * channels : channels;
  const line = new Float64Array(n);
  for (let l = 0; l < lines; l++) {
    for (let c = 0; c < channels; c++) blurLine(image.data, l * lineStep + c, step, n, radius, ww, fw, line);
  }
}

/** `image` blurred as PIL's `image.filter(ImageFilter.GaussianBlur(radius))`; a new image. */
export function pilGaussianBlur(image: Pixels, radius: number): Pixels {
  const out = { ...image, data: image.data.slice() };
  if (radius === 0) return out;
  const passes = 3;
  const r = boxRadius(radius, passes);
  if (r === 0) return out;
  for (let i = 0; i < passes; i++) boxBlur(out, r, true);
  for (let i = 0; i < passes; i++) boxBlur(out, r, false);
  return out;
}
