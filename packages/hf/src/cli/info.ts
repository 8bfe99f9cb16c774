// `dtorch info`: what this install can run on: the packages' version, the LibTorch the addon was
// built against, CUDA and NCCL, and each device with its memory (the GPUs one by one; the CPU
// devices are worker threads sharing the host's memory).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { freemem, totalmem } from 'node:os';
import * as dt from '@dtorch/api';

const require = createRequire(import.meta.url);

/** The version in a package.json, read from disk (the packages are versioned together by changesets). */
function packageVersion(path: string): string {
  return (JSON.parse(readFileSync(path, 'utf8')) as { version: string }).version;
}

/** The version of @dtorch/hf (this package) and of @dtorch/api, its engine front end. */
export function versions(): { hf: string; api: string } {
  return {
    hf: packageVersion(fileURLToPath(new URL('../../package.json', import.meta.url))),
    api: packageVersion(require.resolve('@dtorch/api/package.json')),
  };
}

/** `bytes` in GiB with one decimal ("79.6 GiB"). */
export function gib(bytes: number): string {
  return `${(bytes / 2 ** 30).toFixed(1)} GiB`;
}

/** What {@link cudaLines} reads of dt.torchInfo(). */
export type CudaFacts = Pick<ReturnType<typeof dt.torchInfo>, 'libtorchVersion' | 'builtWithCuda' | 'cudaDeviceCount'>;

/** `dtorch info`'s CUDA line; without CUDA or without a GPU, the lines after it say how to get them. */
export function cudaLines(info: CudaFacts): string[] {
  if (!info.builtWithCuda) {
    return [
      `CUDA: not available: the addon was built against a CPU-only LibTorch (${info.libtorchVersion}). To use GPUs, rebuild it against a CUDA one:`,
      '  in a checkout rm -rf build && LIBTORCH=/path/to/libtorch npm run setup, in a project LIBTORCH=/path/to/libtorch npm rebuild @dtorch/common',
      '  (or with a CUDA torch in the Python that setup finds; it needs the CUDA toolkit: README.md, "Generate a real image")',
    ];
  }
  if (info.cudaDeviceCount === 0) {
    return ['CUDA: built with CUDA, but no GPU is visible: check the NVIDIA driver (nvidia-smi) and CUDA_VISIBLE_DEVICES'];
  }
  return [`CUDA: built with CUDA, ${info.cudaDeviceCount} GPU(s) visible`];
}

/** The lines `dtorch info` prints. */
export function infoLines(): string[] {
  const v = versions();
  const info = dt.torchInfo();
  const lines = [
    `DTorch ${v.hf} (@dtorch/hf ${v.hf}, @dtorch/api ${v.api}), Node.js ${process.versions.node}`,
    `LibTorch ${info.libtorchVersion}`,
    ...cudaLines(info),
    `NCCL: ${info.ncclVersion ? info.ncclVersion : info.builtWithCuda ? 'not found (GPUs exchange data by peer copies)' : 'not available'}`,
    'devices:',
    `  cpu:0-${dt.nativeSettings().cpuDevices - 1} ${info.cpuCores} cores, ${gib(totalmem())} host memory (${gib(freemem())} free), shared by the ${dt.nativeSettings().cpuDevices} CPU devices (worker threads; DTORCH_CPU_DEVICES sets how many)`,
  ];
  for (const d of info.cudaDevices) {
    lines.push(`  cuda:${d.index} ${d.name}, ${gib(d.totalMemory)}, compute capability ${d.computeCapability}`);
  }
  return lines;
}

/** Runs `dtorch info`: prints infoLines(). */
export function runInfo(): void {
  for (const line of infoLines()) console.log(line);
}
