import { describe, expect, it } from 'vitest';
import * as dt from '@dtorch/api';

describe('runtime facts', () => {
  it('reports the LibTorch the addon was built against', () => {
    const info = dt.torchInfo();
    expect(info.libtorchVersion).toMatch(/^2\.\d+\.\d+/);
    expect(info.cpuCores).toBeGreaterThan(0);
    expect(dt.describeRuntime()).toContain(`LibTorch ${info.libtorchVersion}`);
    expect(dt.cuda.isAvailable()).toBe(info.cudaDeviceCount > 0);
    expect(dt.cuda.deviceCount()).toBe(info.cudaDeviceCount);
    expect(dt.cuda.devices().map((d) => d.index)).toEqual(Array.from({ length: info.cudaDeviceCount }, (_, i) => i));
  });

  it('gives each of N CPU workers its share of the cores, so they do not oversubscribe', async () => {
    const mesh = new dt.DeviceMesh('cpu', [0, 1, 2, 3]);
    dt.ones([2], { mesh }).add(1);
    await dt.sync();
    const cores = dt.torchInfo().cpuCores;
    const expected = process.env['DTORCH_INTRAOP_THREADS'] ? Number(process.env['DTORCH_INTRAOP_THREADS']) : Math.max(1, Math.floor(cores / 4));
    const workers = dt.workers();
    expect(workers.map((w) => w.device)).toEqual(['cpu:0', 'cpu:1', 'cpu:2', 'cpu:3']);
    for (const w of workers) expect(w.intraOpThreads).toBe(expected);
  });
});
