#!/usr/bin/env node
// `npm run build:native`: rebuilds the repository's addon (build/Release/dtorch.node) against the
// LibTorch that scripts/setup.mjs found and recorded in .dtorch/torch.json.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildNative } from '../packages/common/setup/build_native.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const record = join(root, '.dtorch', 'torch.json');

try {
  if (!existsSync(record)) throw new Error('no LibTorch recorded in .dtorch/torch.json: run `npm run setup` (or `npm install`) first');
  buildNative({ sourceDir: root, buildDir: join(root, 'build'), torch: JSON.parse(readFileSync(record, 'utf8')), log: (m) => console.log(`dtorch: ${m}`) });
} catch (err) {
  console.error(`dtorch: ${err.message}`);
  process.exit(1);
}
