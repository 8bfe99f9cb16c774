// FP8 checkpoints as they are shared: linears whose weights the file holds as 8-bit floats, with
// their scales in one of the layouts people publish (fromPretrained's folders and fromSingleFile's
// original layouts: a fused qkv's rows keep their tensor's scales). A linear whose weight is F8_E4M3 in
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
import { DTorchError, ErrorCode } from '@dtorch/common';
import { SafetensorsCheckpoint, type CheckpointTensor } from '@dtorch/external';

/** Checkpoint keys of the FP8 layouts that are not weights: scales read here, input scales and markers left. */
export const fp8AuxiliaryKeys: readonly RegExp[] = [/\.weight_scale$/, /\.scale_weight$/, /\.scale_input$/, /\.input_scale$/, /(^|\.)scaled_fp8$/];

/** Rows [from, from + rows) of the file's tensor `key`: where some of a linear's weight rows lie. */
export interface WeightRows {
  readonly key: string;
  readonly from: number;
  readonly rows: number;
}

/** One linear that is FP8 in the file. */
interface Fp8InFile {
  readonly path: string;
  readonly linear: nn.Linear;
  /** The file's weight dtype is float8_e5m2. */
  readonly e5m2: boolean;
  /** Where its weight rows lie in the file, in order, with the key of each tensor's scale(s), if any. */
  readonly segments: readonly (WeightRows & { readonly scaleKey: string | undefined })[];
}

/** What loading an FP8 checkpoint needs done before and after the weights load. */
export interface Fp8Loading {
  /** How many linears the file holds in FP8. */
  readonly count: number;
  /** The model keys the FP8 loader sets itself (the FP8 linears' weight_scale), not read by key. */
  readonly ownKeys: ReadonlySet<string>;
  /** Sets the scales (and requantizes e5m2 weights) once the weights are in. */
  finish(): void;
}

/**
 * Readies `model` for the checkpoint `weights` (a .safetensors file or index) whose linears may
 * be FP8: `weightRows(path, linear)` says where a linear's weight rows lie in the file (one
 * tensor, or rows of fused ones), undefined when the file lacks it. e4m3 linears are made FP8
 * now, so that the file's bytes load as they are; the scales are read by finish().
 */
export function prepareFp8Checkpoint(model: nn.Module, weights: string, weightRows: (path: string, linear: nn.Linear) => readonly WeightRows[] | undefined): Fp8Loading {
  const checkpoint = SafetensorsCheckpoint.open(weights);
  const entries = new Map<string, CheckpointTensor>([...checkpoint.tensors.keys()].map((k) => [k, checkpoint.entry(k)]));
  checkpoint.close();
  const found: Fp8InFile[] = [];
  for (const [path, m] of model.namedModules()) {
    if (!(m instanceof nn.Linear)) continue;
    const rows = weightRows(path, m);
    const dtypes = new Set(rows?.map((r) => entries.get(r.key)?.dtype));
    if (!rows?.length || dtypes.size !== 1 || !(dtypes.has('F8_E4M3') || dtypes.has('F8_E5M2'))) continue;
    const segments = rows.map((r) => {
      const base = r.key.slice(0, -'.weight'.length);
      const scaleKey = [`${base}.weight_scale`, `${base}.scale_weight`].find((k) => entries.has(k));
      if (scaleKey) {
        const n = entries.get(scaleKey)!.shape.reduce((a, b) => a * b, 1);
        const fileRows = entries.get(r.key)!.shape[0]!;
        if (n !== 1 && n !== fileRows) {
          throw new DTorchError(ErrorCode.BadFile, `${weights}: "${scaleKey}" holds ${n} scales; an FP8 weight of ${fileRows} rows takes one per row or one for the tensor`);
        }
      }
      return { ...r, scaleKey };
    });
    found.push({ path, linear: m, e5m2: dtypes.has('F8_E5M2'), segments });
  }
  const ownKeys = new Set<string>();
  for (const f of found) {
    if (f.e5m2) continue;
    nn.quantizeLinearFp8(f.linear); // the FP8 form: the file's bytes replace the values
    ownKeys.add(`${f.path}.weight_scale`);
  }
  return {
    count: found.length,
    ownKeys,
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

// One scale per row of the linear from the file's (per row, per tensor or none), placed as its
// rows lie; an e5m2 weight multiplied by them and quantized again.
function finishLinear(f: Fp8InFile, file: SafetensorsCheckpoint): void {
  const { linear } = f;
  const mesh = linear.weight.mesh;
  const scale = dt.tidy(() => {
    const parts = f.segments.map(({ scaleKey, from, rows }) => {
      if (!scaleKey) return dt.ones([rows], { mesh, dtype: 'float32' });
      const entry = file.entry(scaleKey);
      const bytes = file.readRuns(scaleKey, [{ from: 0, length: entry.end - entry.begin }]);
      const n = entry.shape.reduce((a, b) => a * b, 1);
      const t = dt.fromBuffer(bytes, nn.fromSafetensorsDtype[entry.dtype], [n], { mesh }).to('float32');
      return n === 1 ? t.expand([rows]) : t.narrow(0, from, rows);
    });
    return dt.cat(parts, 0);
  });
  const rowsPlaced = linear.weight.placements.map((p) => (p.isShard(0) ? dt.Shard(0) : dt.Replicate()));
  const placed = dt.tidy(() => scale.redistribute(rowsPlaced));
  if (placed !== scale) scale.dispose();
  if (f.e5m2) {
    // loaded as floats (exact: e5m2 values are bfloat16 values): times the scales, then quantized per row
    if (f.segments.some((s) => s.scaleKey)) linear.setTensor('weight', dt.tidy(() => linear.weight.to('float32').mul(placed.unsqueeze(1)).to(linear.weight.dtype)));
    placed.dispose();
    nn.quantizeLinearFp8(linear);
    return;
  }
  linear.setTensor('weight_scale', placed);
}
