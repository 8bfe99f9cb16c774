// Builds the addon (<buildDir>/Release/dtorch.node) with cmake-js against a LibTorch that
// find_torch.mjs found, from a source folder holding CMakeLists.txt and native/: the repository
// root, or the packed @dtorch/common (which carries copies of both). Writes the LibTorch it used
// beside the addon (torch.json), where the loader reads it to explain a LibTorch that moved.
// Incremental: a small C++ change recompiles one translation unit (precompiled header, ccache
// when present).
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import os from 'node:os';

const require = createRequire(import.meta.url);

export function buildNative({ sourceDir, buildDir, torch, log = console.log }) {
  const cmakeJs = join(dirname(require.resolve('cmake-js/package.json')), 'bin', 'cmake-js');
  const addonApi = dirname(require.resolve('node-addon-api/package.json'));
  const jobs = process.env.DTORCH_BUILD_JOBS ?? String(Math.max(1, os.availableParallelism?.() ?? os.cpus().length));
  const args = [
    cmakeJs, 'build', '--out', buildDir,
    `--CDCMAKE_PREFIX_PATH=${torch.cmakePrefixPath}`,
    `--CDNODE_ADDON_API_DIR=${addonApi}`,
    '--parallel', jobs,
  ];
  log(`building the native addon against LibTorch ${torch.version} at ${torch.cmakePrefixPath} (${jobs} jobs)`);
  const result = spawnSync(process.execPath, args, { cwd: sourceDir, stdio: 'inherit', env: process.env });
  if (result.status !== 0) {
    throw new Error(
      'the native build failed (see the compiler output above).\n' +
        '  - no C++ compiler? install g++ (Debian/Ubuntu: apt-get install g++)\n' +
        '  - no cmake? install cmake >= 3.18 (apt-get install cmake, or pip install cmake)\n' +
        `  - after changing LibTorch, remove ${buildDir} and build again`,
    );
  }
  const addon = join(buildDir, 'Release', 'dtorch.node');
  writeFileSync(join(dirname(addon), 'torch.json'), JSON.stringify(torch, null, 2) + '\n');
  return addon;
}
