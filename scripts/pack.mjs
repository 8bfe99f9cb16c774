#!/usr/bin/env node
// npm's prepack / postpack of every published package (`npm pack`, `npm publish`, changesets):
//   node ../../scripts/pack.mjs prepack [files...]    builds the package's dist (and what it
//        depends on) with turbo, then copies in the repository's LICENSE and the named files or
//        folders (for @dtorch/common: native/ and CMakeLists.txt, which its install script builds)
//   node ../../scripts/pack.mjs postpack [files...]   removes those copies again
// The copies are git-ignored; the repository keeps one native build and one LICENSE.
import { spawnSync } from 'node:child_process';
import { cpSync, readFileSync, rmSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(fileURLToPath(import.meta.url), '..', '..');
const packageDir = process.cwd();
const [step, ...files] = process.argv.slice(2);
const copies = ['LICENSE', ...files];
// the C++ unit tests stay in the repository (CMakeLists.txt builds them only where they exist)
const leftOut = new Set([join(root, 'native', 'tests')]);

if (step === 'prepack') {
  const { name } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
  const turbo = join(root, 'node_modules', 'turbo', 'bin', 'turbo');
  const built = spawnSync(process.execPath, [turbo, 'run', 'build', `--filter=${name}...`, '--output-logs=errors-only'], { cwd: root, stdio: 'inherit' });
  if (built.status !== 0) process.exit(built.status ?? 1);
  for (const file of copies) {
    cpSync(join(root, file), join(packageDir, file), { recursive: true, filter: (src) => !leftOut.has(src) });
  }
} else if (step === 'postpack') {
  for (const file of copies) rmSync(join(packageDir, file), { recursive: true, force: true });
} else {
  console.error(`pack.mjs: expected prepack or postpack, got ${step} (run from ${relative(root, packageDir) || '.'})`);
  process.exit(2);
}
