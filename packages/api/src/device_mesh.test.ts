import { describe, expect, it } from 'vitest';
import { DeviceMesh, initDeviceMesh } from './device_mesh.js';
import * as dt from './index.js';

describe('DeviceMesh', () => {
  it('describes 1-D and N-D meshes', () => {
    const mesh = new DeviceMesh('cpu', [0, 1, 2, 3]);
    expect(mesh.shape).toEqual([4]);
    expect(mesh.ndim).toBe(1);
    expect(mesh.size).toBe(4);
    expect(String(mesh)).toBe("DeviceMesh('cpu', [0, 1, 2, 3])");
    const grid = new DeviceMesh('cpu', [[0, 1], [2, 3]], ['dp', 'tp']);
    expect(grid.shape).toEqual([2, 2]);
    expect(grid.devices).toEqual([0, 1, 2, 3]);
    expect(grid.dimNames).toEqual(['dp', 'tp']);
    expect(grid.equals(new DeviceMesh('cpu', [[0, 1], [2, 3]], ['dp', 'tp']))).toBe(true);
  });

  it('refuses ragged nesting, repeated devices, bad names and missing CUDA devices', () => {
    expect(() => new DeviceMesh('cpu', [[0, 1], [2]])).toThrow(/ragged device nesting: devices\[1\] has 1 entries but its siblings have 2/);
    expect(() => new DeviceMesh('cpu', [0, 1, 1])).toThrow('device 1 appears more than once in [0, 1, 1]');
    expect(() => new DeviceMesh('cpu', [0, 1], ['a', 'b'])).toThrow(/Expected 1 dim name\(s\)/);
    expect(() => new DeviceMesh('cpu', [-1])).toThrow(/device indices are integers in \[0, 2147483647\]/);
    // indices cross to native as int32: 2^32 + 3 must not become device 3, nor 2^31 a negative one
    expect(() => new DeviceMesh('cpu', [2 ** 32 + 3])).toThrow('device devices[0] is 4294967299; device indices are integers in [0, 2147483647]');
    expect(() => new DeviceMesh('cpu', [2 ** 31])).toThrow('device devices[0] is 2147483648;');
    expect(() => new DeviceMesh('cpu', [0.5])).toThrow('device devices[0] is 0.5;');
    expect(() => initDeviceMesh('cpu', [2 ** 20, 2 ** 20])).toThrow('a mesh of shape [1048576, 1048576] has 1099511627776 devices; a mesh has at most 65536');
    expect(() => new DeviceMesh('tpu' as never, [0])).toThrow("Expected 'cpu' or 'cuda' for device type");
    expect(() => new DeviceMesh('cpu', [])).toThrow('a device mesh needs at least one device');
  });

  it('are values: meshes of the same devices in the same shape are one mesh to the engine', async () => {
    const [a, b] = [new DeviceMesh('cpu', [0, 1]), new DeviceMesh('cpu', [0, 1])];
    expect(a.id).toBe(b.id);
    expect(new DeviceMesh('cpu', [1, 0]).id).not.toBe(a.id);
    expect(await dt.ones([2], { mesh: a }).add(dt.ones([2], { mesh: b })).array()).toEqual([2, 2]);
  });

  it('names the CUDA devices this process can see', () => {
    let err: unknown;
    try {
      new DeviceMesh('cuda', [0, 64]);
    } catch (e) {
      err = e;
    }
    expect((err as { code: string }).code).toBe('INVALID_MESH');
    expect((err as Error).message).toMatch(/cuda device (0|64) does not exist: this process sees \d+ CUDA device/);
  });
});
