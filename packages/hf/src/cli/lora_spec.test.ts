// --lora's parser: a path or hub id with an optional ':scale', a file inside a hub repository,
// names made unique, and one clear error for a bad scale.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseLora } from './lora_spec.js';

describe('parseLora', () => {
  it('reads path[:scale], hub ids and files inside hub repositories', () => {
    expect(parseLora('./style.safetensors:0.8')).toEqual([{ source: './style.safetensors', scale: 0.8, name: 'style' }]);
    expect(parseLora('org/detail-lora')).toEqual([{ source: 'org/detail-lora', scale: 1, name: 'detail-lora' }]);
    expect(parseLora('org/repo/sub/x.safetensors:-0.5')).toEqual([{ source: 'org/repo', weightName: 'sub/x.safetensors', scale: -0.5, name: 'x' }]);
    const two = parseLora('a/style.safetensors', parseLora('b/style.safetensors'));
    expect(two.map((l) => l.name)).toEqual(['style', 'style_2']);
  });

  it('reads name=path-or-id[:scale] as the adapter\'s name, and refuses a bad or repeated name', () => {
    expect(parseLora('style=./a/b.safetensors:0.8')).toEqual([{ source: './a/b.safetensors', scale: 0.8, name: 'style' }]);
    expect(parseLora('detail=org/repo/sub/x.safetensors')).toEqual([{ source: 'org/repo', weightName: 'sub/x.safetensors', scale: 1, name: 'detail' }]);
    // an unnamed flag after a named one takes another name
    expect(parseLora('b/style.safetensors', parseLora('style=a.safetensors')).map((l) => l.name)).toEqual(['style', 'style_2']);
    expect(() => parseLora('style=b.safetensors', parseLora('style=a.safetensors'))).toThrow(/named "style" already/);
    expect(() => parseLora('a b=x.safetensors')).toThrow(/NAME of letters, digits/);
    expect(() => parseLora('=x.safetensors')).toThrow(/NAME of letters, digits/);
    const dir = mkdtempSync(join(tmpdir(), 'dtorch-lora-spec-'));
    const cwd = process.cwd();
    try {
      // a file here whose name has an '=' is that file
      writeFileSync(join(dir, 'a=b.safetensors'), '');
      process.chdir(dir);
      expect(parseLora('a=b.safetensors')).toEqual([{ source: 'a=b.safetensors', scale: 1, name: 'a_b' }]);
    } finally {
      process.chdir(cwd);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps a ":" that is part of an existing path, and refuses a scale that is no number', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dtorch-lora-spec-'));
    try {
      const odd = join(dir, 'a:b.safetensors');
      writeFileSync(odd, '');
      expect(parseLora(odd)).toEqual([{ source: odd, scale: 1, name: 'a_b' }]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(() => parseLora('style.safetensors:high')).toThrow(/SCALE a number.*"style.safetensors:high"/);
    expect(() => parseLora('style.safetensors:')).toThrow(/SCALE a number/);
  });
});
