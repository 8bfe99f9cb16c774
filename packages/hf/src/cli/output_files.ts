// The PNG files of `dtorch generate`: --out for one image, cat-0.png, cat-1.png, ... for several.
// They are checked before the pipeline loads (a folder, a place that cannot be written, an
// existing file under --no-overwrite), so a bad --out fails at once rather than after the whole
// generation. An existing file is replaced, as diffusers' image.save() replaces it, unless
// --no-overwrite.
import { closeSync, mkdirSync, mkdtempSync, openSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { DTorchError } from '@dtorch/common';
import { invalid } from './invalid_flag.js';

// the file system's reason, short: "EACCES: permission denied"
function reason(err: unknown): string {
  return (err as Error).message.split(',')[0]!;
}

/** The file of image `index` of `count`: `cat.png` alone, `cat-0.png`, `cat-1.png`, ... for several. */
export function outputPath(out: string, index: number, count: number): string {
  if (count === 1) return out;
  return out.replace(/\.png$/i, '') + `-${index}.png`;
}

// the nearest folder of `path` that exists (the rest is made when the files are written)
function nearestFolder(path: string): string {
  let dir = dirname(path);
  while (!statSync(dir, { throwIfNoEntry: false })) dir = dirname(dir);
  return dir;
}

/**
 * The paths of `count` images written to `out`, each checked writable now, before anything
 * loads: not a folder, its folder writable (probed by making and removing a temporary folder
 * there, which the file system answers as it will answer the write), an existing file writable
 * and, without `overwrite`, refused.
 */
export function checkOutputs(out: string, count: number, overwrite: boolean): string[] {
  if (!/\.png$/i.test(out)) throw invalid(`--out: ${JSON.stringify(out)} is not a .png file; the images are written as PNG`);
  const paths = Array.from({ length: count }, (_, i) => outputPath(out, i, count));
  try {
    const folder = nearestFolder(out);
    if (!statSync(folder).isDirectory()) throw invalid(`--out: ${folder} is a file, not a folder; choose another path for ${out}`);
    rmdirSync(mkdtempSync(join(folder, '.dtorch-')));
    for (const path of paths) {
      const stats = statSync(path, { throwIfNoEntry: false });
      if (!stats) continue;
      if (stats.isDirectory()) throw invalid(`--out: ${path} is a folder; give a file name ending in .png`);
      if (!overwrite) throw invalid(`--out: ${path} exists and --no-overwrite is given; remove it or choose another name`);
      closeSync(openSync(path, 'r+')); // opened for writing, not truncated
    }
  } catch (err) {
    if (err instanceof DTorchError) throw err;
    throw invalid(`--out: cannot write ${out} (${reason(err)}); choose a folder you can write to`);
  }
  return paths;
}

/** Writes `pngs` to `paths` (checkOutputs' answer), making missing folders; without `overwrite` an existing file is never replaced. */
export function writeOutputs(paths: readonly string[], pngs: readonly Buffer[], overwrite: boolean): void {
  pngs.forEach((png, i) => {
    const path = paths[i]!;
    try {
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, png, { flag: overwrite ? 'w' : 'wx' });
    } catch (err) {
      throw invalid(`--out: cannot write ${path} (${reason(err)})`);
    }
  });
}
