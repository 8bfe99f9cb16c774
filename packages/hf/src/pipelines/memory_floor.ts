// The least memory a generate() call needs at once, from its shapes alone, checked against what
// the mesh's devices hold before anything is recorded: a size or an image count that no device
// could hold (99984x99984, 100,000 images) is one error at the call, not a process that grows
// until the machine gives out. Only tensors that must exist together count (the latents, the
// prompt embeddings, the transformer's hidden states; then the VAE decoder's full-size
// activations and the decoded images), each as if split evenly over every device: a floor, so a
// call it lets through may still run out of memory, but one it refuses could not have run.
import { totalmem } from 'node:os';
import * as dt from '@dtorch/api';
import { DTorchError, ErrorCode } from '@dtorch/common';

/** A tensor a phase of generate() holds: what it is, its shape and its dtype. */
export interface HeldTensor {
  /** What it is, for the message ("the VAE decoder's full-size activations"). */
  name: string;
  /** Its full shape. */
  shape: readonly number[];
  /** Its dtype. */
  dtype: dt.DType;
}

/** Bytes of memory, and the devices that hold them, for a message. */
export interface DeviceMemory {
  /** Bytes the devices hold together. */
  bytes: number;
  /** Which memory that is ("the host's 23.5 GiB of memory, shared by its CPU devices"). */
  text: string;
}

const bytesOf = (t: HeldTensor) => t.shape.reduce((n, d) => n * d, 1) * dt.bytesPerElement(t.dtype);

/** `bytes` as GiB or TiB with one decimal. */
export function formatBytes(bytes: number): string {
  return bytes >= 2 ** 40 ? `${(bytes / 2 ** 40).toFixed(1)} TiB` : `${(bytes / 2 ** 30).toFixed(1)} GiB`;
}

// the host's memory, or the container's limit when lower (process.constrainedMemory: the cgroup's)
function hostMemory(): number {
  const limit = process.constrainedMemory?.() ?? 0;
  return limit > 0 && limit < totalmem() ? limit : totalmem();
}

/**
 * What the devices of `meshes` hold together: the host's memory for CPU devices (they share it),
 * each GPU's own for CUDA devices; undefined when a device lies on another host of a cluster
 * (its memory is not known here).
 */
export function deviceMemory(meshes: readonly dt.DeviceMesh[]): DeviceMemory | undefined {
  const cpus = new Set<number>();
  const gpus = new Set<number>();
  for (const mesh of meshes) for (const d of mesh.devices) (mesh.deviceType === 'cuda' ? gpus : cpus).add(d);
  const parts: DeviceMemory[] = [];
  if (cpus.size > 0) {
    if ([...cpus].some((d) => d >= dt.nativeSettings().cpuDevices)) return undefined;
    const bytes = hostMemory();
    parts.push({ bytes, text: `the host's ${formatBytes(bytes)} of memory (shared by its CPU devices)` });
  }
  if (gpus.size > 0) {
    const known = dt.cuda.devices();
    const memory = [...gpus].map((d) => known.find((k) => k.index === d)?.totalMemory);
    if (memory.some((m) => m === undefined)) return undefined;
    const bytes = memory.reduce((a: number, b) => a + b!, 0);
    parts.push({ bytes, text: `the ${formatBytes(bytes)} of cuda:${[...gpus].join(',')}` });
  }
  return { bytes: parts.reduce((a, p) => a + p.bytes, 0), text: parts.map((p) => p.text).join(' and ') };
}

/** The sizes of one generate() call that its floor counts. */
export interface GenerateSizes {
  /** The images made. */
  images: number;
  /** The transformer's batch: the images, twice them when the guidance branches are stacked. */
  rows: number;
  /** The initial latents' shape (drawn in float32). */
  latents: readonly number[];
  /** Image tokens the transformer sees. */
  imageTokens: number;
  /** Text tokens the transformer sees. */
  textTokens: number;
  /** The prompt embeddings' width (joint_attention_dim). */
  textWidth: number;
  /** The transformer's width. */
  width: number;
  /** The transformer's dtype. */
  dtype: dt.DType;
  /** The VAE decoder's channels at full size (block_out_channels[0]) and its dtype; undefined: no decoding ('latent' output). */
  decoder: { channels: number; dtype: dt.DType } | undefined;
  /** The image's size in pixels. */
  imageHeight: number;
  /** The image's width in pixels. */
  imageWidth: number;
}

/** A generate() call's phases: the denoising loop's tensors, then the decoding's. */
export function generatePhases(s: GenerateSizes): HeldTensor[][] {
  const phases: HeldTensor[][] = [[
    { name: 'the initial latents', shape: s.latents, dtype: 'float32' },
    { name: 'the prompt embeddings', shape: [s.rows, s.textTokens, s.textWidth], dtype: s.dtype },
    { name: "the transformer's hidden states", shape: [s.rows, s.imageTokens + s.textTokens, s.width], dtype: s.dtype },
  ]];
  if (s.decoder) {
    phases.push([
      { name: "the VAE decoder's full-size activations", shape: [s.images, s.decoder.channels, s.imageHeight, s.imageWidth], dtype: s.decoder.dtype },
      { name: 'the decoded images', shape: [s.images, 3, s.imageHeight, s.imageWidth], dtype: 'float32' },
    ]);
  }
  return phases;
}

/**
 * Refuses a call whose largest phase (each phase: the tensors it holds at once) needs more bytes
 * than the devices of `meshes` hold together: INVALID_ARGUMENT naming the largest tensor, the
 * bytes and `remedy`. Nothing is recorded either way.
 */
export function checkMemoryFloor(what: string, meshes: readonly dt.DeviceMesh[], phases: readonly (readonly HeldTensor[])[], remedy: string): void {
  const memory = deviceMemory(meshes);
  if (memory === undefined) return;
  let need = 0;
  let phase: readonly HeldTensor[] = [];
  for (const p of phases) {
    const bytes = p.reduce((n, t) => n + bytesOf(t), 0);
    if (bytes > need) [need, phase] = [bytes, p];
  }
  if (need <= memory.bytes) return;
  const largest = phase.reduce((a, b) => (bytesOf(b) > bytesOf(a) ? b : a));
  throw new DTorchError(
    ErrorCode.InvalidArgument,
    `${what}: this call needs at least ${formatBytes(need)} at once (${largest.name}: [${largest.shape.join(', ')}] in ${largest.dtype}, ${formatBytes(bytesOf(largest))}), ` +
      `more than ${memory.text}; ${remedy}`,
  );
}
