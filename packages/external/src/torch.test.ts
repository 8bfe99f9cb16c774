import { describe, expect, it } from 'vitest';
import { describeRuntime, torchInfo } from './torch.js';

describe('torch facts', () => {
  it('name the LibTorch version, the cores and CUDA', () => {
    const info = torchInfo();
    expect(info.libtorchVersion).toMatch(/^\d+\.\d+\.\d+$/);
    expect(info.cpuCores).toBeGreaterThanOrEqual(1);
    expect(info.cudaDeviceCount).toBe(info.builtWithCuda ? info.cudaDeviceCount : 0);
    expect(info.parallelInfo).toContain('at::get_num_threads()');
    const text = describeRuntime();
    expect(text).toContain(`LibTorch ${info.libtorchVersion}`);
    expect(text).toMatch(/CUDA: (\d+ device\(s\)|not built with CUDA)/);
    expect(info.cudaDevices.length).toBe(info.cudaDeviceCount);
    for (const d of info.cudaDevices) {
      expect(d.totalMemory).toBeGreaterThan(0);
      expect(d.computeCapability).toMatch(/^\d+\.\d+$/);
      expect(text).toContain(`cuda:${d.index} ${d.name}`);
    }
  });
});
