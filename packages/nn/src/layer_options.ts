// Options every layer with parameters takes: where its parameters live and their dtype.
import * as dt from '@dtorch/api';
import { checkOptions, invalidParameter } from '@dtorch/common';

/** Options every layer with parameters takes: the mesh its parameters live on and their dtype. */
export interface LayerOptions {
  /** Default: one CPU device. */
  mesh?: dt.DeviceMesh;
  /** Default: float32. */
  dtype?: dt.DType;
}

/** Checks a layer's options object; fills in the mesh and dtype. */
export function layerOptions<T extends LayerOptions>(layer: string, options: unknown): Partial<T> & { mesh: dt.DeviceMesh; dtype: dt.DType } {
  const o = checkOptions<T>(`${layer} options`, options);
  const mesh = o.mesh ?? dt.defaultMesh();
  if (!(mesh instanceof dt.DeviceMesh)) throw invalidParameter(`${layer} mesh`, 'DeviceMesh', mesh);
  const dtype = o.dtype === undefined ? 'float32' : dt.checkDtype(o.dtype, `${layer} dtype`);
  return { ...o, mesh, dtype };
}

/** Replicate on every mesh dim. */
export function replicated(mesh: dt.DeviceMesh): dt.Placement[] {
  return mesh.shape.map(() => dt.Replicate());
}
