// Does a picture show its caption? The check tools/shapes/scenes.py makes of shapes-flux's
// pictures (measure and check there), for the tests: each pixel is named by its nearest palette
// colour; the border ring's commonest colour must be the background; each object's colour must
// cover at least MIN_SPREAD of the picture (counting only pixels whose 3x3 neighbourhood is all of
// it: an edge where two colours blend is dropped), and where the caption gives a position the
// centre of those pixels must lie within MAX_OFFSET of it. tests/hf/shapes_flux.test.ts checks
// this file against scenes.py's measures of drawn scenes (tools/shapes/make_fixtures.py).

/** The palette, in scenes.py's order. */
export const COLOURS: Readonly<Record<string, readonly [number, number, number]>> = {
  red: [220, 30, 30],
  green: [30, 160, 50],
  blue: [35, 70, 220],
  yellow: [250, 215, 20],
  orange: [250, 135, 10],
  purple: [135, 45, 175],
  white: [245, 245, 245],
  black: [15, 15, 15],
};
const NAMES = Object.keys(COLOURS);
const PALETTE = Object.values(COLOURS);

/** Where "at the <position>" puts an object's centre, as fractions of the width and height. */
export const POSITIONS: Readonly<Record<string, readonly [number, number]>> = {
  'top left': [0.25, 0.25], top: [0.5, 0.25], 'top right': [0.75, 0.25],
  left: [0.25, 0.5], centre: [0.5, 0.5], right: [0.75, 0.5],
  'bottom left': [0.25, 0.75], bottom: [0.5, 0.75], 'bottom right': [0.75, 0.75],
};

const BORDER = 3;
export const MIN_SPREAD = 0.0025;
export const MAX_OFFSET = 0.1;

/** An RGB picture: `data` holds width * height * channels bytes, row by row (channels 3 or 4, as PNG decoders give). */
export interface Picture {
  readonly width: number;
  readonly height: number;
  readonly channels: number;
  readonly data: Uint8Array;
}

/** What a caption names: the background and each object's colour, shape and position (or null). */
export function parseCaption(caption: string): { background: string; objects: { colour: string; shape: string; position: string | null }[] } {
  const cut = caption.lastIndexOf(' on ');
  const background = caption.slice(cut + 4).split(' ').slice(1).join(' ').replace(/ background$/, '');
  const objects = caption.slice(0, cut).split(' and ').map((phrase) => {
    const [what, position] = phrase.split(' at the ');
    const [colour, shape] = what!.split(' ').slice(-2);
    return { colour: colour!, shape: shape!, position: position ?? null };
  });
  return { background, objects };
}

function colourNames(p: Picture): Uint8Array {
  const names = new Uint8Array(p.width * p.height);
  for (let i = 0; i < names.length; i++) {
    let best = 0;
    let bestD = Infinity;
    for (let c = 0; c < PALETTE.length; c++) {
      const [r, g, b] = PALETTE[c]!;
      const d = (p.data[i * p.channels]! - r) ** 2 + (p.data[i * p.channels + 1]! - g) ** 2 + (p.data[i * p.channels + 2]! - b) ** 2;
      if (d < bestD) {
        bestD = d;
        best = c;
      }
    }
    names[i] = best;
  }
  return names;
}

/** The measures scenes.measure takes: the border's commonest colour, each object's spread and offset. */
export interface Measures {
  border: string;
  background: string;
  objects: { spread: number; offset: number | null; positioned: boolean }[];
}

export function measure(p: Picture, caption: string): Measures {
  const { width: w, height: h } = p;
  const names = colourNames(p);
  const wanted = parseCaption(caption);
  const counts = new Array<number>(NAMES.length).fill(0);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      if (y < BORDER || y >= h - BORDER || x < BORDER || x >= w - BORDER) counts[names[y * w + x]!]!++;
    }
  }
  const border = NAMES[counts.indexOf(Math.max(...counts))]!;
  const objects = wanted.objects.map((o) => {
    const c = NAMES.indexOf(o.colour);
    let n = 0;
    let sx = 0;
    let sy = 0;
    for (let y = 1; y < h - 1; y++) {
      for (let x = 1; x < w - 1; x++) {
        let solid = true;
        for (let dy = -1; dy <= 1 && solid; dy++) for (let dx = -1; dx <= 1 && solid; dx++) solid = names[(y + dy) * w + x + dx] === c;
        if (solid) {
          n += 1;
          sx += x;
          sy += y;
        }
      }
    }
    let offset: number | null = null;
    if (o.position !== null && n > 0) {
      const [fx, fy] = POSITIONS[o.position]!;
      offset = Math.hypot(sx / n + 0.5 - fx * w, sy / n + 0.5 - fy * h) / w;
    }
    return { spread: n / (w * h), offset, positioned: o.position !== null };
  });
  return { border, background: wanted.background, objects };
}

/** Whether a picture shows its caption, item by item (scenes.check). */
export function check(p: Picture, caption: string): { ok: boolean; background: boolean; objects: boolean[]; measures: Measures } {
  const m = measure(p, caption);
  const objects = m.objects.map((o) => o.spread >= MIN_SPREAD && (!o.positioned || (o.offset !== null && o.offset <= MAX_OFFSET)));
  const background = m.border === m.background;
  return { ok: background && objects.every(Boolean), background, objects, measures: m };
}
