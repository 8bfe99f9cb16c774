import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { readSafetensorsHeader, readTensorBytes, writeSafetensors } from './safetensors.js';

const dir = mkdtempSync(join(tmpdir(), 'dtorch-safetensors-'));

// A file with the given header object and data bytes (the header length written as claimed).
function rawFile(name: string, header: unknown, data = new Uint8Array(0), claimedLength?: bigint): string {
  const json = Buffer.from(typeof header === 'string' ? header : JSON.stringify(header));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(claimedLength ?? BigInt(json.length));
  const path = join(dir, name);
  writeFileSync(path, Buffer.concat([length, json, data]));
  return path;
}

describe('safetensors', () => {
  it('round-trips tensors and metadata, with positioned reads of a range', () => {
    const path = join(dir, 'round.safetensors');
    const a = new Float32Array([1, 2, 3, 4, 5, 6]);
    writeSafetensors(path, {
      a: { dtype: 'F32', shape: [2, 3], data: new Uint8Array(a.buffer) },
      empty: { dtype: 'BF16', shape: [0, 4], data: new Uint8Array(0) },
      flags: { dtype: 'BOOL', shape: [2], data: new Uint8Array([1, 0]) },
    }, { format: 'pt' });
    const header = readSafetensorsHeader(path);
    expect(header.metadata).toEqual({ format: 'pt' });
    expect([...header.tensors.keys()]).toEqual(['a', 'empty', 'flags']);
    expect(header.tensors.get('a')).toMatchObject({ dtype: 'F32', shape: [2, 3] });
    expect(new Float32Array(readTensorBytes(header, 'a').buffer)).toEqual(a);
    // row 1 only: bytes [12, 24)
    expect(new Float32Array(readTensorBytes(header, 'a', 12, 12).buffer)).toEqual(new Float32Array([4, 5, 6]));
    expect(Array.from(readTensorBytes(header, 'flags'))).toEqual([1, 0]);
    expect(() => readTensorBytes(header, 'b')).toThrow('has no tensor "b"');
  });

  it('reads the file PyTorch wrote for the composite fixtures', () => {
    const path = fileURLToPath(new URL('../../../tests/fixtures/composite_ops.safetensors', import.meta.url));
    const header = readSafetensorsHeader(path);
    expect(header.metadata['torch']).toMatch(/^2\./);
    expect(header.tensors.get('rms_norm_bf16.out')).toMatchObject({ dtype: 'BF16', shape: [2, 3, 16] });
  });

  // the boundary of the overlap check: ranges are [begin, end), so sharing one byte is an
  // overlap and touching is not (an empty range may sit anywhere)
  it('refuses ranges that overlap by one byte and takes ranges that touch', () => {
    const u8 = (begin: number, end: number) => ({ dtype: 'U8', shape: [end - begin], data_offsets: [begin, end] });
    expect(() => readSafetensorsHeader(rawFile('one.st', { a: u8(0, 4), b: u8(3, 7) }, new Uint8Array(7)))).toThrow('tensors "a" and "b" overlap');
    expect(() => readSafetensorsHeader(rawFile('one-reversed.st', { b: u8(3, 7), a: u8(0, 4) }, new Uint8Array(7)))).toThrow('tensors "a" and "b" overlap');
    expect(() => readSafetensorsHeader(rawFile('inside.st', { a: u8(0, 6), b: u8(5, 6) }, new Uint8Array(6)))).toThrow('tensors "a" and "b" overlap');
    const touching = readSafetensorsHeader(rawFile('touch.st', { a: u8(0, 4), b: u8(4, 8), e: u8(2, 2) }, new Uint8Array(8)));
    expect([...touching.tensors.values()].map((t) => [t.name, t.end - t.begin])).toEqual([['a', 4], ['b', 4], ['e', 0]]);
  });

  it('refuses bad files, naming the file and the reason', () => {
    const short = join(dir, 'short.safetensors');
    writeFileSync(short, Buffer.from([1, 2, 3]));
    expect(() => readSafetensorsHeader(short)).toThrow(`${short}: not a valid safetensors file: the file has 3 bytes`);
    expect(() => readSafetensorsHeader(rawFile('huge.st', {}, undefined, 1n << 40n))).toThrow('more than the 104857600 allowed');
    expect(() => readSafetensorsHeader(rawFile('long.st', {}, undefined, 4096n))).toThrow('the header claims 4096 bytes but the file has');
    expect(() => readSafetensorsHeader(rawFile('json.st', '{"a": '))).toThrow('the header is not JSON');
    expect(() => readSafetensorsHeader(rawFile('dtype.st', { a: { dtype: 'F8', shape: [1], data_offsets: [0, 1] } }, new Uint8Array(1)))).toThrow(
      'tensor "a" has dtype "F8"; known: F64, F32',
    );
    expect(() => readSafetensorsHeader(rawFile('size.st', { a: { dtype: 'F32', shape: [2], data_offsets: [0, 4] } }, new Uint8Array(4)))).toThrow(
      'tensor "a" (F32 [2]) needs 8 bytes but its range holds 4',
    );
    expect(() => readSafetensorsHeader(rawFile('past.st', { a: { dtype: 'U8', shape: [8], data_offsets: [0, 8] } }, new Uint8Array(4)))).toThrow(
      'past the end of the file',
    );
    expect(() =>
      readSafetensorsHeader(
        rawFile('overlap.st', { a: { dtype: 'U8', shape: [4], data_offsets: [0, 4] }, b: { dtype: 'U8', shape: [4], data_offsets: [2, 6] } }, new Uint8Array(8)),
      ),
    ).toThrow('tensors "a" and "b" overlap');
    expect(() => readSafetensorsHeader(rawFile('meta.st', { __metadata__: { n: 1 } }))).toThrow('__metadata__ must map strings to strings');
    expect(() => readSafetensorsHeader(rawFile('array.st', '[1, 2]'))).toThrow('the header is not a JSON object');
    expect(() => readSafetensorsHeader(rawFile('entry.st', { a: 3 }))).toThrow('tensor "a" is 3; expected {dtype, shape, data_offsets}');
    expect(() => readSafetensorsHeader(rawFile('proto.st', { a: { dtype: 'toString', shape: [1], data_offsets: [0, 1] } }, new Uint8Array(1)))).toThrow(
      'tensor "a" has dtype "toString"',
    );
    expect(() => readSafetensorsHeader(rawFile('shape.st', { a: { dtype: 'U8', shape: [-1], data_offsets: [0, 1] } }, new Uint8Array(1)))).toThrow(
      'tensor "a" has shape [-1]; expected non-negative integers',
    );
    expect(() => readSafetensorsHeader(rawFile('order.st', { a: { dtype: 'U8', shape: [1], data_offsets: [4, 3] } }, new Uint8Array(4)))).toThrow(
      'tensor "a" has data_offsets [4,3]; expected [begin, end] with begin <= end',
    );
    // a file cut inside its data: the last tensor's range runs past the end
    const whole = join(dir, 'whole.st');
    writeSafetensors(whole, { a: { dtype: 'F32', shape: [4], data: new Uint8Array(16) } });
    const cut = join(dir, 'cut.st');
    writeFileSync(cut, readFileSync(whole).subarray(0, readFileSync(whole).length - 5));
    expect(() => readSafetensorsHeader(cut)).toThrow(/cut\.st: not a valid safetensors file: tensor "a" ends at byte \d+, past the end of the file/);
    expect(() => readSafetensorsHeader(join(dir, 'missing.st'))).toThrow(/missing\.st: cannot open/);
  });
});
