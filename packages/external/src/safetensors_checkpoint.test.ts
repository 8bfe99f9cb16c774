import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeSafetensors } from './safetensors.js';
import { SafetensorsCheckpoint } from './safetensors_checkpoint.js';
import { readSafetensorsIndex } from './safetensors_index.js';

const dir = mkdtempSync(join(tmpdir(), 'dtorch-checkpoint-'));
const bytes = (...v: number[]) => new Uint8Array(new Float32Array(v).buffer);

function shards(): string {
  writeSafetensors(join(dir, 'a.safetensors'), { x: { dtype: 'F32', shape: [2, 3], data: bytes(0, 1, 2, 3, 4, 5) } });
  writeSafetensors(join(dir, 'b.safetensors'), { y: { dtype: 'F32', shape: [2], data: bytes(6, 7) } });
  const index = join(dir, 'model.safetensors.index.json');
  writeFileSync(index, JSON.stringify({ metadata: { total_size: 32 }, weight_map: { x: 'a.safetensors', y: 'b.safetensors' } }));
  return index;
}

describe('SafetensorsCheckpoint', () => {
  it('opens a sharded index and reads byte runs with positioned reads, counting the bytes', () => {
    const checkpoint = SafetensorsCheckpoint.open(shards());
    expect([...checkpoint.tensors.keys()].sort()).toEqual(['x', 'y']);
    expect(checkpoint.entry('y').file).toBe(join(dir, 'b.safetensors'));
    expect(checkpoint.dataBytes).toBe(32);
    // column 1..2 of x: two runs of 8 bytes, not adjacent
    expect(new Float32Array(checkpoint.readRuns('x', [{ from: 4, length: 8 }, { from: 16, length: 8 }]).buffer)).toEqual(new Float32Array([1, 2, 4, 5]));
    expect(checkpoint.bytesRead).toBe(16);
    expect(checkpoint.reads).toBe(2);
    // adjacent runs coalesce into one read
    expect(new Float32Array(checkpoint.readRuns('x', [{ from: 0, length: 12 }, { from: 12, length: 12 }]).buffer)).toEqual(new Float32Array([0, 1, 2, 3, 4, 5]));
    expect(checkpoint.reads).toBe(3);
    expect(checkpoint.bytesRead).toBe(40);
    expect(() => checkpoint.readRuns('x', [{ from: 20, length: 8 }])).toThrow('bytes [20, 28) are outside tensor "x" (24 bytes)');
    expect(() => checkpoint.entry('z')).toThrow('has no tensor "z"');
    checkpoint.close();
    expect(() => checkpoint.readRuns('x', [{ from: 0, length: 4 }])).toThrow('was closed');
  });

  it('refuses bad indexes, naming the file and the reason', () => {
    const write = (name: string, text: string) => {
      const path = join(dir, name);
      writeFileSync(path, text);
      return path;
    };
    shards();
    expect(() => readSafetensorsIndex(write('json.index.json', '{'))).toThrow(/json\.index\.json: not a valid safetensors index: it is not JSON/);
    expect(() => readSafetensorsIndex(write('nomap.index.json', '{"metadata": {}}'))).toThrow('it has no "weight_map" object');
    expect(() => readSafetensorsIndex(write('escape.index.json', '{"weight_map": {"x": "../etc/passwd"}}'))).toThrow(
      'weight_map["x"] is "../etc/passwd"; expected a shard file name relative to the index',
    );
    expect(() => SafetensorsCheckpoint.open(write('missing.index.json', '{"weight_map": {"x": "gone.safetensors"}}'))).toThrow(/gone\.safetensors: cannot open/);
    expect(() => SafetensorsCheckpoint.open(write('wrong.index.json', '{"weight_map": {"x": "b.safetensors", "y": "b.safetensors"}}'))).toThrow(
      'weight_map puts "x" in',
    );
    writeSafetensors(join(dir, 'dup.safetensors'), { x: { dtype: 'F32', shape: [1], data: bytes(1) } });
    expect(() => SafetensorsCheckpoint.open(write('dup.index.json', '{"weight_map": {"x": "a.safetensors", "y": "dup.safetensors"}}'))).toThrow(
      'tensor "x" is in both',
    );
  });
});
