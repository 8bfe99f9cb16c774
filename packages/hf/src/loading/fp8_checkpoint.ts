// FP8 checkpoints as they are shared: linears whose weights the file holds as 8-bit floats, with
// their scales in one of the layouts people publish. A linear whose `<path>.weight` is F8_E4M3 in
// the file is made FP8 (nn.quantizeLinearFp8's form) before the weights load, so its bytes load
// as they are; its scales come from
//   `<path>.weight_scale`  float32 [out, 1] or [out] (compressed-tensors, FBGEMM and torchao exports)
//   `<path>.scale_weight`  one float32 for the tensor (ComfyUI's "scaled FP8", marked by `scaled_fp8`)
//   neither                1 (weights cast to FP8 as they were: Kijai's flux1-dev-fp8)
// and are broadcast to one per row. F8_E5M2 weights (a wider range than e4m3's ±448) load as
// floats, times their scale, and are quantized again per row (DTorch's FP8 matmul takes e4m3).
// The keys these layouts add beside the weights (input scales, the marker) are not the model's.
import * as dt from '@dtorch/api';
import * as nn from '@dtorch/nn';
import { SafetensorsCheckpoint, type CheckpointTensor } from '@dtorch/external';
import { DTorchError, ErrorCode } from '@dtorch/common';

/** Checkpoint keys of the FP8 layouts that are not weights: scales read here, input scales and markers left. */
export const fp8AuxiliaryKeys: readonly RegExp[] = [/\.weight_scale$/, /\.scale_weight$/, /\.scale_input$/, /\.input_scale$/, /(^|\.)scaled_fp8$/];

/** One linear that is FP8 in the file. */
interface Fp8InFile {
  readonly path: string;
  readonly linear: nn.Linear;
  /** The file's weight dtype. */
  readonly e5m2: boolean;
  /** The file's key of its scale(s), if any. */
  readonly scaleKey: string | undefined;
}

/** What loading an FP8 checkpoint needs done before and after the weights load. */
export interface Fp8Loading {
  /** How many linears the file holds in FP8. */
  readonly count: number;
  /** Sets the scales (and requantizes e5m2 weights) once the weights are in. */
  finish(): void;
}

/**
 * Readies `model` for `weights` (a .safetensors file or index) whose linears may be FP8: e4m3
 * linears made FP8 now, their scale keys kept out of the state-dict load (`keyMap`). `fileKey`
 * maps a model key to the file's (aliases). The scales are read by finish().
 */
export function prepareFp8Checkpoint(model: nn.Module, weights: string, fileKey: (key: string) => string, keyMap: Record<string, string>): Fp8Loading {
  const checkpoint = SafetensorsCheckpoint.open(weights);
  const entries = new Map<string, CheckpointTensor>([...checkpoint.tensors.keys()].map((k) => [k, checkpoint.entry(k)]));
  checkpoint.close();
  const found: Fp8InFile[] = [];
  for (const [path, m] of model.namedModules()) {
    if (!(m instanceof nn.Linear)) continue;
    const weightKey = fileKey(`${path}.weight`);
    const entry = entries.get(weightKey);
    if (!entry || (entry.dtype !== 'F8_E4M3' && entry.dtype !== 'F8_E5M2')) continue;
    const base = weightKey.slice(0, -'.weight'.length);
    const scaleKey = [`${base}.weight_scale`, `${base}.scale_weight`].find((k) => entries.has(k));
    if (scaleKey) {
      const n = entries.get(scaleKey)!.shape.reduce((a, b) => a * b, 1);
      if (n !== 1 && n !== m.outFeatures) {
        throw new DTorchError(ErrorCode.BadFile, `${weights}: "${scaleKey}" holds ${n} scales; an FP8 weight of ${m.outFeatures} rows takes one per row or one for the tensor`);
      }
    }
    found.push({ path, linear: m, e5m2: entry.dtype === 'F8_E5M2', scaleKey });
  }
  for (const f of found) {
    if (f.e5m2) continue;
    nn.quantizeLinearFp8(f.linear); // the FP8 form: the file's bytes replace the values
    keyMap[`${f.path}.weight_scale`] = `${f.path}.weight_scale (read by the FP8 loader)`; // not a file key: left to finish()
  }
  return {
    count: found.length,
    finish: () => {
      if (found.length === 0) return;
      const file = SafetensorsCheckpoint.open(weights);
      try {
        for (const f of found) finishLinear(f, file);
      } finally {
        file.close();
      }
    },
  };
}

// The linear's scales from the file, one per row, placed as its rows lie; an e5m2 weight
// multiplied by them and quantized again.
function finishLinear(f: Fp8InFile, file: SafetensorsCheckpoint): void {
  const { linear } = f;
  const mesh = linear.weight.mesh;
  const rows = linear.outFeatures;
  const scale = dt.tidy(() => {
    if (!f.scaleKey) return dt.ones([rows], { mesh, dtype: 'float32' });
    const entry = file.entry(f.scaleKey);
    const bytes = file.readRuns(f.scaleKey, [{ from: 0, length: entry.end - entry.begin }]);
    const n = entry.shape.reduce((a, b) => a * b, 1);
    const t = dt.fromBuffer(bytes, nn.fromSafetensorsDtype[entry.dtype], [n], { mesh }).to('float32');
    return n === 1 ? t.expand([rows]).contiguous() : t;
  });
  const rowsPlaced = linear.weight.placements.map((p) => (p.isShard(0) ? dt.Shard(0) : dt.Replicate()));
  const placed = dt.tidy(() => scale.redistribute(rowsPlaced));
  if (placed !== scale) scale.dispose();
  if (f.e5m2) {
    // loaded as floats (exact: e5m2 values are bfloat16 values): times the scales, then quantized per row
    if (f.scaleKey) linear.setTensor('weight', dt.tidy(() => linear.weight.to('float32').mul(placed.unsqueeze(1)).to(linear.weight.dtype)));
    placed.dispose();
    nn.quantizeLinearFp8(linear);
    return;
  }
  linear.setTensor('weight_scale', placed);
}
