import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { defaultCandidates, formatLoadFailure, inRepository, loadNative, native } from './loader.js';
import { DTorchError } from './errors.js';

describe('addon loader', () => {
  it('lists every candidate and says how to build when the addon is missing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dtorch-loader-'));
    const candidates = [join(dir, 'a', 'dtorch.node'), join(dir, 'b', 'dtorch.node')];
    let caught: unknown;
    try {
      loadNative(candidates);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(DTorchError);
    const err = caught as DTorchError;
    expect(err.code).toBe('NATIVE_ADDON_MISSING');
    expect(err.message).toContain('Could not load the DTorch native addon (dtorch.node). Tried:');
    expect(err.message).toContain(`${candidates[0]}: not found`);
    expect(err.message).toContain(`${candidates[1]}: not found`);
    expect(err.message).toContain('Run `npm install` at the repository root');
  });

  it('keeps the error of a file that exists but does not load', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dtorch-loader-'));
    const broken = join(dir, 'dtorch.node');
    writeFileSync(broken, 'not an ELF file');
    expect(() => loadNative([broken])).toThrow(/dtorch\.node: .*(invalid ELF header|file too short)/);
  });

  it('maps typical native failures to remedies', () => {
    const text = formatLoadFailure([
      { path: '/x/dtorch.node', error: 'libtorch_cpu.so: cannot open shared object file: No such file or directory' },
    ]);
    expect(text).toContain('LibTorch is not where the addon was built against');
    expect(formatLoadFailure([{ path: '/y', error: "/usr/lib/libstdc++.so.6: version `GLIBCXX_3.4.32' not found" }])).toContain(
      'C++ runtime is older',
    );
    expect(formatLoadFailure([{ path: '/z', error: 'undefined symbol: _ZN2at4_ops' }])).toContain('do not match');
  });

  it('in a project that installed the packages, names npm 11\'s script approval and the rebuild when the addon is missing', () => {
    const text = formatLoadFailure([{ path: '/app/node_modules/@dtorch/common/build/Release/dtorch.node', error: 'not found' }], false);
    expect(text).toContain('its install script not approved (npm 11: `npm install-scripts approve @dtorch/common zeromq protobufjs`)');
    expect(text).toContain('Run `npm rebuild @dtorch/common` in your project');
    expect(text).not.toContain('repository root');
  });

  it('names the LibTorch the addon was built against when it is gone, and the command that rebuilds', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dtorch-loader-'));
    writeFileSync(join(dir, 'torch.json'), JSON.stringify({ cmakePrefixPath: '/gone/torch', version: '2.13.0' }));
    const text = formatLoadFailure([
      { path: join(dir, 'dtorch.node'), error: 'libc10.so: cannot open shared object file: No such file or directory' },
    ]);
    expect(text).toContain('built against LibTorch 2.13.0 at /gone/torch, and libc10.so is no longer in /gone/torch/lib');
    expect(text).toContain('`npm run setup` at the repository root'); // these tests run in the repository
  });

  it('tries DTORCH_NATIVE_PATH first, then the repository\'s build (in a checkout) or the package\'s own', () => {
    expect(inRepository).toBe(true);
    const candidates = defaultCandidates();
    expect(candidates.at(-1)).toMatch(/build[\\/]Release[\\/]dtorch\.node$/);
    expect(candidates.at(-1)).not.toMatch(/packages[\\/]common[\\/]build/);
  });

  it('refuses a DTORCH_NATIVE_PATH that names no file, rather than loading another build', () => {
    const script = "import { native } from '@dtorch/common'; try { native(); console.log('loaded'); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }";
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: dirname(fileURLToPath(import.meta.url)),
      env: { ...process.env, DTORCH_NATIVE_PATH: '/nonexistent/dtorch.node' },
      encoding: 'utf8',
    });
    const out = JSON.parse(r.stdout.trim());
    expect(out.code).toBe('NATIVE_ADDON_MISSING');
    expect(out.message).toContain('  - /nonexistent/dtorch.node: not found');
    expect(out.message).toContain('DTORCH_NATIVE_PATH=/nonexistent/dtorch.node names this addon, which does not exist');
    expect(out.message).not.toMatch(/build[\\/]Release/);
  });

  it('loads only a .node addon: a script DTORCH_NATIVE_PATH names is refused in one line and never runs', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dtorch-loader-'));
    const ran = join(dir, 'ran');
    const payload = `require('node:fs').writeFileSync(${JSON.stringify(ran)}, 'x'); module.exports = { common: { setErrorClass() {}, setLogLevel() {}, napiVersion: 99 } };`;
    const script = "import { native } from '@dtorch/common'; try { native(); console.log(JSON.stringify({ loaded: true })); } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }";
    for (const name of ['evil.js', 'evil.cjs', 'evil.json', 'evil']) {
      const path = join(dir, name);
      writeFileSync(path, name.endsWith('.json') ? '{ "common": {} }' : payload);
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
        cwd: dirname(fileURLToPath(import.meta.url)),
        env: { ...process.env, DTORCH_NATIVE_PATH: path },
        encoding: 'utf8',
      });
      const out = JSON.parse(r.stdout.trim());
      expect(existsSync(ran), name).toBe(false);
      expect(out.code, name).toBe('NATIVE_ADDON_MISSING');
      expect(out.message).toBe(
        `DTORCH_NATIVE_PATH=${path} is not a Node addon: only a .node file (a built dtorch.node) is loaded, nothing else is run; point it at one, or unset it.`,
      );
    }
  });

  it('opens a .node file as a shared library, never as a script', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dtorch-loader-'));
    const ran = join(dir, 'ran');
    const disguised = join(dir, 'dtorch.node');
    writeFileSync(disguised, `require('node:fs').writeFileSync(${JSON.stringify(ran)}, 'x');`);
    expect(() => loadNative([disguised])).toThrow(/dtorch\.node: .*(invalid ELF header|file too short)/);
    expect(existsSync(ran)).toBe(false);
    expect(() => loadNative([join(dir, 'addon.js')])).toThrow(/^\S+addon\.js is not a Node addon: only a \.node file/);
  });

  it('loads the built addon and registers DTorchError with it', () => {
    const addon = native();
    expect(addon.common.napiVersion).toBeGreaterThanOrEqual(8);
  });
});
