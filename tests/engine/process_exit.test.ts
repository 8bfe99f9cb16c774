// process.exit() in the middle of work: the engine stops on the process's 'exit' event, while
// the device runtimes are still up (on GPUs, C's exit() would otherwise tear the CUDA allocator
// down under workers that still hold memory, and the process aborts), the exit code is the
// program's, and work recorded after that fails with ENGINE_SHUT_DOWN instead of waiting forever.
import { describe, expect, it } from 'vitest';
import { cudaSkip } from '../conformance/meshes.js';
import { runNode } from './run_node.js';

const script = (device: string) => `
import * as dt from '@dtorch/api';
const mesh = new dt.DeviceMesh('${device}', [0]);
const x = dt.randn([512, 512], { seed: 1, mesh });
for (let i = 0; i < 20; i++) x.matmul(x).dispose();
process.on('exit', () => {
  try {
    dt.zeros([1], { mesh }).dataSync();
    console.log('after exit: read');
  } catch (err) {
    console.log('after exit: ' + err.code);
  }
});
setTimeout(() => process.exit(3), 1);
`;

describe('process.exit() while the engine works', () => {
  it('exits with the program code, and later work is refused, on CPU devices', () => {
    const r = runNode(script('cpu'), {});
    expect(r.signal, r.stderr).toBe(null);
    expect(r.status, r.stderr).toBe(3);
    expect(r.stdout.trim()).toBe('after exit: ENGINE_SHUT_DOWN');
    expect(r.stderr).not.toMatch(/terminate|abort|native error/);
  });

  it.skipIf(cudaSkip(1))('exits with the program code on a GPU, with no abort from the CUDA runtime', () => {
    const r = runNode(script('cuda'), {});
    expect(r.signal, r.stderr).toBe(null);
    expect(r.status, r.stderr).toBe(3);
    expect(r.stdout.trim()).toBe('after exit: ENGINE_SHUT_DOWN');
    expect(r.stderr).not.toMatch(/terminate|abort|native error/);
  });
});
