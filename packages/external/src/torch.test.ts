import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { describeRuntime, dtorchVersion, stopKernelTrace, torchInfo } from './torch.js';

// What the addon reports is checked against facts gathered without it: the LibTorch the build
// recorded (.dtorch/torch.json, written by setup or the device harness) and the NVIDIA GPUs of
// this machine (nvidia-smi -L, else /dev/nvidia<N>, within CUDA_VISIBLE_DEVICES).
const recordPath = fileURLToPath(new URL('../../../.dtorch/torch.json', import.meta.url));
const record = existsSync(recordPath) ? (JSON.parse(readFileSync(recordPath, 'utf8')) as { cmakePrefixPath: string; version: string }) : undefined;

function machineGpus(): number {
  let count = existsSync('/dev') ? readdirSync('/dev').filter((n) => /^nvidia\d+$/.test(n)).length : 0;
  if (count > 0) {
    const listed = spawnSync('nvidia-smi', ['-L'], { encoding: 'utf8', timeout: 10_000 });
    if (listed.status === 0) count = listed.stdout.split('\n').filter((l) => l.startsWith('GPU ')).length;
  }
  const visible = process.env['CUDA_VISIBLE_DEVICES'];
  return visible === undefined ? count : Math.min(count, visible.trim() === '' ? 0 : visible.split(',').length);
}

describe('torch facts', () => {
  it('name the LibTorch version, the cores and CUDA', () => {
    const info = torchInfo();
    expect(info.libtorchVersion).toMatch(/^\d+\.\d+\.\d+$/);
    expect(info.cpuCores).toBeGreaterThanOrEqual(1);
    expect(info.parallelInfo).toContain('at::get_num_threads()');
    const text = describeRuntime();
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(text.split('\n')[0]).toBe(`DTorch ${version} on LibTorch ${info.libtorchVersion}`);
    expect(dtorchVersion).toBe(version);
    expect(text).toContain(info.builtWithCuda ? `CUDA: ${info.cudaDeviceCount} device(s)` : 'CUDA: not built with CUDA');
    expect(info.cudaDevices.map((d) => d.index)).toEqual(Array.from({ length: info.cudaDeviceCount }, (_, i) => i));
    for (const d of info.cudaDevices) {
      expect(d.totalMemory).toBeGreaterThan(0);
      expect(d.computeCapability).toMatch(/^\d+\.\d+$/);
      expect(text).toContain(`cuda:${d.index} ${d.name}`);
    }
  });

  // a CUDA build on a machine without GPUs sees none; a CPU-only build sees none anywhere
  it('see the GPUs this machine has, when built with CUDA', () => {
    const info = torchInfo();
    expect(info.cudaDeviceCount).toBe(info.builtWithCuda ? machineGpus() : 0);
  });

  it.skipIf(!record)(`match the LibTorch the build recorded${record ? '' : ' (skipped: no .dtorch/torch.json)'}`, () => {
    const info = torchInfo();
    expect(info.libtorchVersion).toBe(record!.version.split('+')[0]);
    // CMakeLists.txt builds with CUDA exactly when this LibTorch has its CUDA half
    expect(info.builtWithCuda).toBe(existsSync(join(record!.cmakePrefixPath, 'lib', 'libtorch_cuda.so')));
  });
});

describe('stopKernelTrace', () => {
  it('refuses a count of kernels or gaps that is not a non-negative integer, before it stops anything', () => {
    expect(() => stopKernelTrace(-1)).toThrow('expected a non-negative integer for top, got -1');
    expect(() => stopKernelTrace(10, 1.5)).toThrow('expected a non-negative integer for gaps, got 1.5');
    expect(() => stopKernelTrace(10, -1)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }) as Error);
  });
});
