#!/usr/bin/env node
// One-command setup of the repository, run by `npm install` (postinstall) or `npm run setup`:
//   1. check the tools (C++ compiler, cmake),
//   2. find LibTorch (packages/common/setup/find_torch.mjs): $LIBTORCH, $Torch_DIR, the torch of
//      .venv, then of python3, else create .venv and `pip install torch==2.13.0`,
//   3. record it in .dtorch/torch.json, build the addon, build the TypeScript packages.
// Each failure names what is missing and how to fix it. (Outside the repository, the packed
// @dtorch/common builds its own addon at install: packages/common/setup/install.mjs.)
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildNative } from '../packages/common/setup/build_native.mjs';
import { SetupError, checkTools, findTorch } from '../packages/common/setup/find_torch.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const log = (msg) => console.log(`dtorch setup: ${msg}`);

function buildTypeScript() {
  log('building the TypeScript packages');
  const turbo = spawnSync(process.execPath, [join(root, 'node_modules', 'turbo', 'bin', 'turbo'), 'run', 'build', '--output-logs=errors-only'], { cwd: root, stdio: 'inherit' });
  if (turbo.status !== 0) throw new SetupError('the TypeScript build failed (see above); fix it and run `npm run build`');
}

function main() {
  if (process.env.DTORCH_SKIP_SETUP === '1') {
    log('skipped (DTORCH_SKIP_SETUP=1)');
    return;
  }
  checkTools();
  const venv = join(root, '.venv');
  const torch = findTorch({ venvs: [venv], installVenv: venv, log });
  log(`LibTorch ${torch.version} from ${torch.source} at ${torch.cmakePrefixPath}${torch.cuda ? ' (CUDA)' : ''}`);
  mkdirSync(join(root, '.dtorch'), { recursive: true });
  writeFileSync(join(root, '.dtorch', 'torch.json'), JSON.stringify(torch, null, 2) + '\n');
  buildNative({ sourceDir: root, buildDir: join(root, 'build'), torch, log });
  buildTypeScript();
  log('done. Try: npm test   or   npm run example');
}

try {
  main();
} catch (err) {
  console.error(`\ndtorch setup failed: ${err.message}\n`);
  process.exit(1);
}
