#!/usr/bin/env node
// One-command setup, run by `npm install` (postinstall) or `npm run setup`:
//   1. check the tools (C++ compiler, cmake),
//   2. find LibTorch: $LIBTORCH, $Torch_DIR, a Python torch (.venv first, then python3),
//      else create .venv and `pip install torch==2.13.0`,
//   3. record it in .dtorch/torch.json, build the addon, build the TypeScript packages.
// Each failure names what is missing and how to fix it.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildNative } from './build-native.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const TORCH_VERSION = '2.13.0';
const log = (msg) => console.log(`dtorch setup: ${msg}`);

class SetupError extends Error {}

function run(cmd, args, opts = {}) {
  return spawnSync(cmd, args, { encoding: 'utf8', cwd: root, ...opts });
}

function checkTools() {
  const cxx = process.env.CXX ?? 'c++';
  if (run(cxx, ['--version']).status !== 0 && run('g++', ['--version']).status !== 0) {
    throw new SetupError('no C++ compiler found (tried $CXX, c++, g++). Install one: apt-get install g++');
  }
  if (run('cmake', ['--version']).status !== 0) {
    throw new SetupError('cmake is not installed. Install cmake >= 3.18: apt-get install cmake (or pip install cmake)');
  }
}

// LibTorch prefix -> the facts the build needs; checks the layout and the machine.
function describePrefix(prefix, source) {
  const config = join(prefix, 'share', 'cmake', 'Torch', 'TorchConfig.cmake');
  if (!existsSync(config)) {
    throw new SetupError(`${source} points at ${prefix}, which has no share/cmake/Torch/TorchConfig.cmake; ` +
      'point it at an unpacked LibTorch (the folder holding include/, lib/ and share/)');
  }
  const lib = join(prefix, 'lib', 'libtorch_cpu.so');
  if (!existsSync(lib)) throw new SetupError(`${prefix}/lib/libtorch_cpu.so is missing: this LibTorch is incomplete`);
  const elf = readFileSync(lib).subarray(0, 20);
  const machine = elf.readUInt16LE(18);
  const expected = process.arch === 'x64' ? 62 : process.arch === 'arm64' ? 183 : machine;
  if (machine !== expected) {
    throw new SetupError(`${lib} is built for another processor (ELF machine ${machine}) than this Node (${process.arch}); ` +
      'install a LibTorch for this machine');
  }
  const versionFile = join(prefix, 'include', 'torch', 'headeronly', 'version.h');
  const legacyVersionFile = join(prefix, 'include', 'torch', 'csrc', 'api', 'include', 'torch', 'version.h');
  const text = [versionFile, legacyVersionFile].filter(existsSync).map((f) => readFileSync(f, 'utf8')).join('\n');
  const parts = [...text.matchAll(/#define TORCH_VERSION_(MAJOR|MINOR|PATCH)\s+(\d+)/g)].map((m) => m[2]);
  const version = parts.length === 3 ? parts.join('.') : 'unknown';
  const cuda = existsSync(join(prefix, 'lib', 'libtorch_cuda.so'));
  return { cmakePrefixPath: prefix, version, cuda, source };
}

function pythonTorch(python) {
  // cmake_prefix_path is <torch>/share/cmake; the LibTorch prefix is <torch>
  const code = 'import os, torch; print(os.path.dirname(os.path.dirname(torch.utils.cmake_prefix_path)))';
  const r = run(python, ['-W', 'ignore', '-c', code]);
  if (r.status !== 0) return null;
  const prefix = r.stdout.trim().split('\n').pop();
  return prefix ? describePrefix(prefix, `${python}'s torch`) : null;
}

function findTorch() {
  if (process.env.LIBTORCH) return describePrefix(process.env.LIBTORCH, '$LIBTORCH');
  if (process.env.Torch_DIR) return describePrefix(join(process.env.Torch_DIR, '..', '..', '..'), '$Torch_DIR');
  const venvPython = join(root, '.venv', 'bin', 'python');
  for (const python of [venvPython, 'python3']) {
    if (python === venvPython && !existsSync(venvPython)) continue;
    const found = pythonTorch(python);
    if (found) return found;
  }
  return installTorch(venvPython);
}

function installTorch(venvPython) {
  if (run('python3', ['--version']).status !== 0) {
    throw new SetupError('no LibTorch found and no python3 to install one. Either set LIBTORCH=/path/to/libtorch, ' +
      'or install python3 (apt-get install python3 python3-venv) and run `npm run setup` again');
  }
  if (!existsSync(venvPython)) {
    log('creating .venv for LibTorch');
    const venv = run('python3', ['-m', 'venv', join(root, '.venv')], { stdio: 'inherit' });
    if (venv.status !== 0) throw new SetupError('python3 -m venv failed: install python3-venv (apt-get install python3-venv)');
  }
  log(`installing torch==${TORCH_VERSION} into .venv (LibTorch comes inside the wheel)`);
  const pip = run(venvPython, ['-m', 'pip', 'install', '--retries', '0', `torch==${TORCH_VERSION}`], { stdio: 'inherit' });
  if (pip.status !== 0) {
    log('retrying without dependencies (LibTorch alone is enough to build)');
    const bare = run(venvPython, ['-m', 'pip', 'install', '--retries', '0', '--no-deps', `torch==${TORCH_VERSION}`], { stdio: 'inherit' });
    if (bare.status !== 0) {
      throw new SetupError(`pip could not install torch==${TORCH_VERSION}. Set LIBTORCH=/path/to/libtorch (an unpacked ` +
        'LibTorch) or Torch_DIR, or make a torch wheel reachable to pip, then run `npm run setup`');
    }
  }
  const found = pythonTorch(venvPython);
  if (found) return found;
  // torch installed without its Python deps cannot be imported; find the prefix on disk.
  const site = run(venvPython, ['-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])']).stdout.trim();
  return describePrefix(join(site, 'torch'), '.venv torch');
}

function buildTypeScript() {
  log('building the TypeScript packages');
  const turbo = run(process.execPath, [join(root, 'node_modules', 'turbo', 'bin', 'turbo'), 'run', 'build', '--output-logs=errors-only'], { stdio: 'inherit' });
  if (turbo.status !== 0) throw new SetupError('the TypeScript build failed (see above); fix it and run `npm run build`');
}

function main() {
  if (process.env.DTORCH_SKIP_SETUP === '1') {
    log('skipped (DTORCH_SKIP_SETUP=1)');
    return;
  }
  checkTools();
  const torch = findTorch();
  log(`LibTorch ${torch.version} from ${torch.source} at ${torch.cmakePrefixPath}${torch.cuda ? ' (CUDA)' : ''}`);
  mkdirSync(join(root, '.dtorch'), { recursive: true });
  writeFileSync(join(root, '.dtorch', 'torch.json'), JSON.stringify(torch, null, 2) + '\n');
  buildNative({ torch, log });
  buildTypeScript();
  log('done. Try: npm test   or   npm run example');
}

try {
  main();
} catch (err) {
  console.error(`\ndtorch setup failed: ${err.message}\n`);
  process.exit(1);
}
