#!/usr/bin/env node
// The install script of the packed @dtorch/common: `npm install @dtorch/common` (or any package
// above it) and `npm rebuild @dtorch/common` find LibTorch and build the addon inside this
// package (build/Release/dtorch.node), as tfjs-node builds against its library at install. The
// package carries the native sources and CMakeLists.txt (copied in when it is packed).
//
// Where LibTorch comes from: find_torch.mjs ($LIBTORCH, $Torch_DIR, the project's .venv, python3),
// else a virtual environment in the user's cache ($DTORCH_VENV, default ~/.cache/dtorch/venv),
// so that reinstalling the package does not download torch again.
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildNative } from './build_native.mjs';
import { checkTools, findTorch } from './find_torch.mjs';

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const log = (msg) => console.log(`@dtorch/common: ${msg}`);

// In the repository the package is its source folder, and the root's setup builds the one addon.
const repoRoot = resolve(packageDir, '..', '..');
const inRepository = existsSync(join(repoRoot, 'turbo.json')) && existsSync(join(repoRoot, 'native')) && resolve(repoRoot, 'packages', 'common') === packageDir;

function main() {
  if (inRepository) return; // scripts/setup.mjs (the root's postinstall) builds it
  if (process.env.DTORCH_SKIP_SETUP === '1') return log('native build skipped (DTORCH_SKIP_SETUP=1)');
  if (process.env.DTORCH_NATIVE_PATH) return log(`native build skipped: DTORCH_NATIVE_PATH names the addon to load (${process.env.DTORCH_NATIVE_PATH})`);
  checkTools();
  const project = process.env.INIT_CWD ?? process.cwd(); // where `npm install` was run
  const cache = process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache');
  const torch = findTorch({
    venvs: [join(project, '.venv')],
    installVenv: process.env.DTORCH_VENV ?? join(cache, 'dtorch', 'venv'),
    log,
  });
  log(`LibTorch ${torch.version} from ${torch.source}${torch.cuda ? ' (CUDA)' : ''}`);
  const buildDir = join(packageDir, 'build');
  const addon = buildNative({ sourceDir: packageDir, buildDir, torch, log });
  // keep the addon and its torch.json; the objects and the precompiled header are hundreds of MB
  for (const entry of readdirSync(buildDir)) if (entry !== 'Release') rmSync(join(buildDir, entry), { recursive: true, force: true });
  log(`built ${addon}`);
}

try {
  main();
} catch (err) {
  console.error(`\n@dtorch/common: the native addon could not be built: ${err.message}\n` +
    'Fix what is named above, then run `npm rebuild @dtorch/common` (LIBTORCH=/path/to/libtorch picks a LibTorch).\n');
  process.exit(1);
}
