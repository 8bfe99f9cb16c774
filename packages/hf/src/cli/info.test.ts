import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';
import { cudaLines, infoLines } from './info.js';

describe('dtorch info', () => {
  it('on a CPU-only build, says how to build against a CUDA LibTorch', () => {
    const lines = cudaLines({ libtorchVersion: '2.13.0', builtWithCuda: false, cudaDeviceCount: 0 });
    expect(lines[0]).toBe('CUDA: not available: the addon was built against a CPU-only LibTorch (2.13.0). To use GPUs, rebuild it against a CUDA one:');
    expect(lines.join('\n')).toContain('rm -rf build && LIBTORCH=/path/to/libtorch npm run setup'); // build/ caches the LibTorch it found
    expect(lines.join('\n')).toContain('LIBTORCH=/path/to/libtorch npm rebuild @dtorch/common');
    expect(lines.join('\n')).toContain('README.md, "Generate a real image"');
  });

  it('with CUDA, counts the GPUs, and with none visible names the driver and CUDA_VISIBLE_DEVICES', () => {
    expect(cudaLines({ libtorchVersion: '2.11.0', builtWithCuda: true, cudaDeviceCount: 2 })).toEqual(['CUDA: built with CUDA, 2 GPU(s) visible']);
    expect(cudaLines({ libtorchVersion: '2.11.0', builtWithCuda: true, cudaDeviceCount: 0 })[0]).toMatch(/no GPU is visible: check the NVIDIA driver \(nvidia-smi\) and CUDA_VISIBLE_DEVICES$/);
  });

  it('prints the lines of this build, the CUDA lines after the versions', () => {
    const text = infoLines().join('\n');
    if (dt.torchInfo().builtWithCuda) expect(text).toMatch(/^LibTorch .*\nCUDA: built with CUDA/m);
    else expect(text).toMatch(/^LibTorch .*\nCUDA: not available: the addon was built against a CPU-only LibTorch .*\n {2}in a checkout rm -rf build && LIBTORCH=/m);
  });
});
