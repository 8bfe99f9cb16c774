// Finds the LibTorch the native build compiles and links against, in the order DESIGN §6 gives:
// $LIBTORCH (an unpacked LibTorch), $Torch_DIR, the torch of a Python (the given virtual
// environments first, then python3), else a virtual environment made for it with
// `pip install torch==2.13.0` (LibTorch is inside the wheel). Shared by the repository's setup
// (scripts/setup.mjs) and the install script of the packed @dtorch/common (install.mjs).
// Each failure is a SetupError naming what is missing and how to fix it.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const TORCH_VERSION = '2.13.0';

export class SetupError extends Error {}

function run(cmd, args, opts = {}) {
  return spawnSync(cmd, args, { encoding: 'utf8', ...opts });
}

/** The C++ compiler and cmake the build needs. */
export function checkTools() {
  const cxx = process.env.CXX ?? 'c++';
  if (run(cxx, ['--version']).status !== 0 && run('g++', ['--version']).status !== 0) {
    throw new SetupError('no C++ compiler found (tried $CXX, c++, g++). Install one: apt-get install g++');
  }
  if (run('cmake', ['--version']).status !== 0) {
    throw new SetupError('cmake is not installed. Install cmake >= 3.18: apt-get install cmake (or pip install cmake)');
  }
}

/** A LibTorch prefix -> the facts the build needs ({ cmakePrefixPath, version, cuda, source }); checks the layout and the machine. */
export function describePrefix(prefix, source) {
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

const venvPython = (venv) => join(venv, 'bin', 'python');

/**
 * The LibTorch to build against. `venvs`: virtual environments whose torch is tried before
 * python3's (those that exist); `installVenv`: where to create one and pip-install torch when no
 * LibTorch is found.
 */
export function findTorch({ venvs, installVenv, log }) {
  if (process.env.LIBTORCH) return describePrefix(process.env.LIBTORCH, '$LIBTORCH');
  if (process.env.Torch_DIR) return describePrefix(join(process.env.Torch_DIR, '..', '..', '..'), '$Torch_DIR');
  const pythons = [...venvs.map(venvPython).filter((p) => existsSync(p)), 'python3'];
  for (const python of pythons) {
    const found = pythonTorch(python);
    if (found) return found;
  }
  return installTorch(installVenv, log);
}

function installTorch(venv, log) {
  const python = venvPython(venv);
  if (run('python3', ['--version']).status !== 0) {
    throw new SetupError('no LibTorch found and no python3 to install one. Either set LIBTORCH=/path/to/libtorch, ' +
      'or install python3 (apt-get install python3 python3-venv) and try again');
  }
  if (!existsSync(python)) {
    log(`creating ${venv} for LibTorch`);
    const made = run('python3', ['-m', 'venv', venv], { stdio: 'inherit' });
    if (made.status !== 0) throw new SetupError('python3 -m venv failed: install python3-venv (apt-get install python3-venv)');
  }
  log(`installing torch==${TORCH_VERSION} into ${venv} (LibTorch comes inside the wheel)`);
  const pip = run(python, ['-m', 'pip', 'install', '--retries', '0', `torch==${TORCH_VERSION}`], { stdio: 'inherit' });
  if (pip.status !== 0) {
    log('retrying without dependencies (LibTorch alone is enough to build)');
    const bare = run(python, ['-m', 'pip', 'install', '--retries', '0', '--no-deps', `torch==${TORCH_VERSION}`], { stdio: 'inherit' });
    if (bare.status !== 0) {
      throw new SetupError(`pip could not install torch==${TORCH_VERSION}. Set LIBTORCH=/path/to/libtorch (an unpacked ` +
        'LibTorch) or Torch_DIR, or make a torch wheel reachable to pip, then try again');
    }
  }
  const found = pythonTorch(python);
  if (found) return found;
  // torch installed without its Python deps cannot be imported; find the prefix on disk.
  const site = run(python, ['-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])']).stdout.trim();
  return describePrefix(join(site, 'torch'), `${venv} torch`);
}
