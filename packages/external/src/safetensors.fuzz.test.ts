// Fuzzing the safetensors header parser: 12,000 mutations of a valid file (byte flips, length
// changes, truncations, JSON-level edits of dtypes, shapes and offsets). Every outcome is either
// a header whose entries all lie inside the file without overlapping, or a BAD_FILE DTorchError
// that names the file; nothing else is ever thrown.
import { describe, expect, it } from 'vitest';
import { DTorchError, ErrorCode } from '@dtorch/common';
import { parseSafetensorsHeader } from './safetensors.js';

// a deterministic generator, so a failure reproduces
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const baseHeader = {
  __metadata__: { format: 'pt' },
  'a.weight': { dtype: 'F32', shape: [2, 3], data_offsets: [0, 24] },
  'a.bias': { dtype: 'BF16', shape: [3], data_offsets: [24, 30] },
  flags: { dtype: 'BOOL', shape: [2], data_offsets: [30, 32] },
};

function fileOf(header: unknown, dataBytes = 32, claimed?: bigint): Uint8Array {
  const json = Buffer.from(typeof header === 'string' ? header : JSON.stringify(header));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(claimed ?? BigInt(json.length));
  return new Uint8Array(Buffer.concat([length, json, Buffer.alloc(dataBytes, 7)]));
}

const weird: unknown[] = [-1, 1.5, 2 ** 60, 1e308, null, 'x', [], {}, true, '__proto__', 'toString', 0, 2 ** 53, Number.MAX_SAFE_INTEGER];

function mutateJson(pick: () => number): Uint8Array {
  const h = JSON.parse(JSON.stringify(baseHeader)) as Record<string, Record<string, unknown>>;
  const names = Object.keys(h);
  const name = names[Math.floor(pick() * names.length)]!;
  const any = () => weird[Math.floor(pick() * weird.length)];
  switch (Math.floor(pick() * 8)) {
    case 0: h[name]!['dtype'] = ['F8', 'f32', 'I4', 'U64', 'toString', 'constructor', any()][Math.floor(pick() * 7)]; break;
    case 1: h[name]!['shape'] = [any(), Math.floor(pick() * 10)]; break;
    case 2: h[name]!['data_offsets'] = [Math.floor(pick() * 40) - 4, Math.floor(pick() * 40)]; break;
    case 3: h[name]!['data_offsets'] = [any(), any()]; break;
    case 4: (h as Record<string, unknown>)[name] = any(); break;
    case 5: delete h[name]!['shape']; break;
    case 6: h['__proto__'] = { dtype: 'U8', shape: [1], data_offsets: [31, 32] }; break;
    default: h['__metadata__'] = any() as Record<string, unknown>;
  }
  return fileOf(h, Math.floor(pick() * 40));
}

function mutateBytes(pick: () => number): Uint8Array {
  const file = fileOf(baseHeader);
  const out = Buffer.from(file);
  switch (Math.floor(pick() * 4)) {
    case 0: {
      const flips = 1 + Math.floor(pick() * 4);
      for (let i = 0; i < flips; i++) out[Math.floor(pick() * out.length)] = Math.floor(pick() * 256);
      return out;
    }
    case 1: return out.subarray(0, Math.floor(pick() * out.length)); // truncated
    case 2: return fileOf(baseHeader, 32, BigInt(Math.floor(pick() * 400)) * (pick() < 0.1 ? 1n << 40n : 1n)); // bad length
    default: {
      const at = 8 + Math.floor(pick() * (out.length - 8));
      return Buffer.concat([out.subarray(0, at), Buffer.from([Math.floor(pick() * 128)]), out.subarray(at)]); // a byte inserted
    }
  }
}

describe('safetensors header fuzz', () => {
  it('12,000 mutated headers: a consistent header or a BAD_FILE error naming the file, never anything else', () => {
    const pick = rng(20240606);
    const outcomes = { ok: 0, refused: 0 };
    const reasons = new Set<string>();
    for (let i = 0; i < 12_000; i++) {
      const file = i % 2 === 0 ? mutateJson(pick) : mutateBytes(pick);
      const path = `fuzz-${i}.safetensors`;
      const readAt = (length: number, position: number) => {
        if (position + length > file.length) throw new DTorchError(ErrorCode.BadFile, `${path}: not a valid safetensors file: the file ends early`);
        return file.subarray(position, position + length);
      };
      try {
        const header = parseSafetensorsHeader(path, file.length, readAt);
        outcomes.ok++;
        const ranges = [...header.tensors.values()].sort((a, b) => a.begin - b.begin);
        for (const [k, t] of ranges.entries()) {
          expect(t.begin).toBeLessThanOrEqual(t.end);
          expect(t.end).toBeLessThanOrEqual(file.length);
          if (k > 0 && t.end > t.begin) expect(t.begin).toBeGreaterThanOrEqual(ranges[k - 1]!.end);
        }
      } catch (err) {
        if (!(err instanceof DTorchError) || err.code !== ErrorCode.BadFile || !err.message.startsWith(`${path}: `)) {
          throw new Error(`mutation ${i} threw ${String(err)}`);
        }
        outcomes.refused++;
        reasons.add(err.message.replace(/^[^:]+: not a valid safetensors file: /, '').replace(/[\d"[\]{}]+.*$/, '').trim());
      }
    }
    expect(outcomes.ok + outcomes.refused).toBe(12_000);
    expect(outcomes.refused).toBeGreaterThan(6_000);
    expect(outcomes.ok).toBeGreaterThan(100);
    expect(reasons.size).toBeGreaterThanOrEqual(6);
  });
});
