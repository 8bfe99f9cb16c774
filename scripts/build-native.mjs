#!/usr/bin/env node
// Builds the addon (build/Release/dtorch.node) with cmake-js against the LibTorch that
// scripts/setup.mjs found and recorded in .dtorch/torch.json. Incremental: a small C++
// change recompiles one translation unit (precompiled header, ccache when present).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import os from 'node:os';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

export function buildNative({ torch, log = console.log } = {}) {
  const infoPath = join(root, '.dtorch', 'torch.json');
  const info = torch ?? (existsSync(infoPath) ? JSON.parse(readFileSync(infoPath, 'utf8')) : null);
  if (!info) {
    throw new Error('no LibTorch recorded in .dtorch/torch.json: run `npm run setup` (or `npm install`) first');
  }
  const cmakeJs = join(dirname(require.resolve('cmake-js/package.json')), 'bin', 'cmake-js');
  const addonApi = dirname(require.resolve('node-addon-api/package.json'));
  const jobs = process.env.DTORCH_BUILD_JOBS ?? String(Math.max(1, os.availableParallelism?.() ?? os.cpus().length));
  const args = [
    cmakeJs, 'build', '--out', join(root, 'build'),
    `--CDCMAKE_PREFIX_PATH=${info.cmakePrefixPath}`,
    `--CDNODE_ADDON_API_DIR=${addonApi}`,
    '--parallel', jobs,
  ];
  log(`dtorch: building the native addon against LibTorch ${info.version} (${jobs} jobs)`);
  const result = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit', env: process.env });
  if (result.status !== 0) {
    throw new Error(
      'the native build failed (see the compiler output above).\n' +
        '  - no C++ compiler? install g++ (Debian/Ubuntu: apt-get install g++)\n' +
        '  - no cmake? install cmake >= 3.18 (apt-get install cmake, or pip install cmake)\n' +
        '  - after changing LibTorch, remove build/ and run `npm run setup` again',
    );
  }
  return join(root, 'build', 'Release', 'dtorch.node');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    buildNative();
  } catch (err) {
    console.error(`dtorch: ${err.message}`);
    process.exit(1);
  }
}
