// The byte runs of a row-major tensor that hold one piece of it (a box: offset and shape per
// dim). Dims after the last one the piece cuts are whole, so each run covers the piece's extent
// on that dim times everything after it; a piece cut only on dim 0 is one run.
import type { ByteRun } from '@dtorch/external';

/**
 * The byte runs (`from`, `length`, in bytes from the tensor's start) of a row-major tensor of
 * `shape` that hold `piece`, a box given by its offset and shape per dim, for elements of
 * `elementSize` bytes. Runs are in order; a piece cut only on dim 0 is one run, an empty piece none.
 */
export function sliceRuns(shape: readonly number[], piece: { shape: readonly number[]; offset: readonly number[] }, elementSize: number): ByteRun[] {
  if (piece.shape.some((s) => s === 0)) return [];
  const strides = shape.map((_, d) => shape.slice(d + 1).reduce((a, b) => a * b, 1));
  let cut = -1;
  for (let d = 0; d < shape.length; d++) if (piece.shape[d] !== shape[d]) cut = d;
  if (cut < 0) return [{ from: 0, length: shape.reduce((a, b) => a * b, 1) * elementSize }];
  const length = piece.shape[cut]! * strides[cut]! * elementSize;
  const runs: ByteRun[] = [];
  const visit = (d: number, start: number): void => {
    if (d === cut) {
      runs.push({ from: (start + piece.offset[cut]! * strides[cut]!) * elementSize, length });
      return;
    }
    for (let i = piece.offset[d]!; i < piece.offset[d]! + piece.shape[d]!; i++) {
      visit(d + 1, start + i * strides[d]!);
    }
  };
  visit(0, 0);
  return runs;
}
