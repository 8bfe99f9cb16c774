// What a new user does, outside the repository: pack every published package, install the
// tarballs into a fresh project (npm runs @dtorch/common's install script, which builds the addon
// there from the package's own copy of the native sources), then use it: a 2-device program with
// @dtorch/api and @dtorch/nn, a strict TypeScript consumer of every package compiled (its
// dependencies' declarations checked too: skipLibCheck off) and run, `npx dtorch generate` (tiny-flux,
// and shapes-flux from the weights the tarball ships),
// and the errors when LibTorch moves or the addon is missing. Minutes (a full native build):
// `npm run test:packaging`, also part of `npm test`.
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PNG } from 'pngjs'; // the tests' own: @dtorch/hf writes PNGs with sharp and ships no PNG reader
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { check } from '../hf/shapes_check.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const published = ['common', 'external', 'core', 'api', 'nn', 'hf'];
const rootManifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };

interface Packed {
  name: string;
  version: string;
  filename: string;
  files: { path: string }[];
}

let work: string;
let app: string;
let libtorch: string;
let torchVersion: string;
let packed: Packed[];

// The environment of a user's shell: none of the npm_* variables (and INIT_CWD) that `npm test` sets.
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('npm_') && k !== 'INIT_CWD'));
  return { ...env, ...extra };
}

function run(cmd: string, args: string[], options: SpawnSyncOptions = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', cwd: app, env: userEnv(), timeout: 300_000, ...options });
  return { status: r.status, stdout: String(r.stdout), stderr: String(r.stderr), error: r.error };
}

function ok(r: ReturnType<typeof run>, what: string) {
  expect(r.error, `${what}: ${r.error}`).toBeUndefined();
  expect(r.status, `${what} failed:\n${r.stdout.slice(-4000)}\n${r.stderr.slice(-4000)}`).toBe(0);
  return r;
}

beforeAll(() => {
  const record = join(root, '.dtorch', 'torch.json');
  if (!existsSync(record)) throw new Error('no .dtorch/torch.json: run `npm install` at the repository root first');
  const torch = JSON.parse(readFileSync(record, 'utf8')) as { cmakePrefixPath: string; version: string };
  torchVersion = torch.version;
  work = mkdtempSync(join(tmpdir(), 'dtorch-packaging-'));
  // LibTorch through a link of our own, so that the test can move it away and back
  libtorch = join(work, 'libtorch');
  symlinkSync(torch.cmakePrefixPath, libtorch);
  const tarballs = join(work, 'tarballs');
  mkdirSync(tarballs);
  const pack = ok(run('npm', ['pack', '--json', '--pack-destination', tarballs, ...published.flatMap((p) => ['-w', `@dtorch/${p}`])], { cwd: root, env: process.env }), 'npm pack');
  packed = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('['))) as Packed[];
  app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }, null, 2));
  for (const file of readdirSync(join(here, 'project'))) cpSync(join(here, 'project', file), join(app, file));
  // what the README says to install: the packages, and for TypeScript typescript and @types/node
  const install = run('npm', [
    'install', '--no-audit', '--no-fund', '--prefer-offline', '--foreground-scripts',
    ...packed.map((p) => join(tarballs, p.filename)),
    `typescript@${rootManifest.devDependencies['typescript']}`, `@types/node@${rootManifest.devDependencies['@types/node']}`,
  ], { env: userEnv({ LIBTORCH: libtorch }), timeout: 1_200_000 });
  ok(install, 'npm install of the tarballs');
}, 1_500_000);

afterAll(() => {
  if (work && !process.env['DTORCH_KEEP_PACKAGING']) rmSync(work, { recursive: true, force: true });
});

describe('the packed packages, installed outside the repository', () => {
  it('are what an npm user expects: README, LICENSE, metadata, ranges, ESM only, no tests', () => {
    expect(packed.map((p) => p.name)).toEqual(published.map((p) => `@dtorch/${p}`));
    for (const p of packed) {
      const files = p.files.map((f) => f.path);
      expect(files, p.name).toEqual(expect.arrayContaining(['README.md', 'LICENSE', 'package.json', 'dist/index.js', 'dist/index.d.ts']));
      expect(files.filter((f) => /\.test\.[jt]s$/.test(f)), `${p.name}: no tests`).toEqual([]);
      const manifest = JSON.parse(readFileSync(join(app, 'node_modules', p.name, 'package.json'), 'utf8'));
      expect(manifest.type, p.name).toBe('module');
      expect(manifest.engines?.node, p.name).toMatch(/^>=20/);
      expect(manifest.repository?.directory, p.name).toBe(`packages/${p.name.slice('@dtorch/'.length)}`);
      expect(manifest.publishConfig?.access, p.name).toBe('public');
      expect(Object.keys(manifest.exports['.']), `${p.name}: ESM only`).toEqual(['types', 'import']);
      for (const [dep, range] of Object.entries<string>(manifest.dependencies ?? {})) {
        if (dep.startsWith('@dtorch/')) expect(range, `${p.name} -> ${dep}`).toBe(`^${p.version}`);
      }
      expect(readFileSync(join(app, 'node_modules', p.name, 'README.md'), 'utf8'), p.name).toMatch(/ESM/);
    }
    const common = packed[0]!.files.map((f) => f.path);
    expect(common).toEqual(expect.arrayContaining(['CMakeLists.txt', 'setup/install.mjs', 'setup/find_torch.mjs', 'native/core/runner/engine.cpp', 'native/bindings/addon.cpp']));
    expect(common.filter((f) => f.startsWith('native/tests/')), 'the C++ unit tests stay in the repository').toEqual([]);
    expect(packed.at(-1)!.files.map((f) => f.path)).toEqual(expect.arrayContaining(['bin/dtorch.js', 'assets/tiny-tokenizers/t5/spiece.model.gz', 'assets/tiny-pipelines/tiny-flux.json']));
    for (const workspace of ['tests', 'bench']) {
      expect(JSON.parse(readFileSync(join(root, workspace, 'package.json'), 'utf8')).private, `${workspace} is never published`).toBe(true);
    }
  });

  it('built the addon at install inside node_modules, against the LibTorch it found, keeping only the addon', () => {
    const release = join(app, 'node_modules', '@dtorch', 'common', 'build', 'Release');
    expect(readdirSync(join(release, '..'))).toEqual(['Release']);
    expect(readdirSync(release).sort()).toEqual(['dtorch.node', 'torch.json']);
    const record = JSON.parse(readFileSync(join(release, 'torch.json'), 'utf8'));
    expect(record).toMatchObject({ cmakePrefixPath: libtorch, version: torchVersion, source: '$LIBTORCH' });
  });

  it('runs @dtorch/api and @dtorch/nn on a mesh of 2 CPU devices', () => {
    const r = ok(run(process.execPath, ['smoke.mjs']), 'smoke.mjs');
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out.placements).toEqual(['S(0)']);
    expect(out.workers).toEqual(['cpu:0', 'cpu:1']);
    expect(out.y).toHaveLength(4);
    out.y.flat().forEach((v: number, i: number) => expect(v).toBeCloseTo(out.reference.flat()[i], 5));
  });

  it('compiles a consumer of every package with tsc --strict, skipLibCheck off and no types or lib configured, and runs it', () => {
    const consumer = readFileSync(join(app, 'consumer.ts'), 'utf8');
    for (const p of published) expect(consumer, `the consumer imports @dtorch/${p}`).toContain(`from '@dtorch/${p}'`);
    expect(JSON.parse(readFileSync(join(app, 'tsconfig.json'), 'utf8').replace(/^\s*\/\/.*$/gm, '')).compilerOptions).toMatchObject({ strict: true, skipLibCheck: false });
    ok(run(process.execPath, [join(app, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.']), 'tsc');
    const r = ok(run(process.execPath, [join('out', 'consumer.js')]), 'the compiled consumer');
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out).toMatchObject({ rows: 4, code: 'INVALID_ARGUMENT', latentShape: [1, 16, 64], runtime: true, dtype: 'float32', ids: 4, vocabulary: 49408 });
    expect(out.pngBytes).toBeGreaterThan(100);
  });

  it('runs `npx dtorch generate --model tiny-flux` and writes a PNG of the size asked (width x height)', () => {
    const r = ok(run('npx', ['dtorch', 'generate', '--model', 'tiny-flux', '--prompt', 'a cat', '--size', '96x64', '--steps', '2', '--devices', 'cpu:0,1', '--parallel', 'ulysses=2', '--out', 'cat.png']), 'npx dtorch generate');
    expect(r.stdout).toMatch(/random weights/);
    const png = PNG.sync.read(readFileSync(join(app, 'cat.png')));
    expect([png.width, png.height]).toEqual([96, 64]);
  });

  it('runs `npx dtorch generate --model shapes-flux` from the weights shipped in @dtorch/hf, and the picture shows its caption', () => {
    const prompt = 'a large white square on a blue background';
    ok(run('npx', ['dtorch', 'generate', '--model', 'shapes-flux', '--prompt', prompt, '--devices', 'cpu:0,1', '--parallel', 'ulysses=2', '--out', 'shapes.png']), 'npx dtorch generate');
    const png = PNG.sync.read(readFileSync(join(app, 'shapes.png')));
    expect([png.width, png.height]).toEqual([128, 128]);
    expect(check({ width: png.width, height: png.height, channels: 4, data: png.data }, prompt).ok).toBe(true);
  });

  it('names the LibTorch it needs and the command that fixes it when LibTorch moved', () => {
    renameSync(libtorch, `${libtorch}.moved`);
    try {
      const r = run(process.execPath, ['smoke.mjs']);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain(`built against LibTorch ${torchVersion} at ${libtorch}`);
      expect(r.stderr).toContain(`is no longer in ${join(libtorch, 'lib')}`);
      expect(r.stderr).toContain('`npm rebuild @dtorch/common` in your project');
      expect(r.stderr).not.toMatch(/repository root/);
    } finally {
      renameSync(`${libtorch}.moved`, libtorch);
    }
  });

  it('says how to build the addon when it is missing (installed with --ignore-scripts)', () => {
    const build = join(app, 'node_modules', '@dtorch', 'common', 'build');
    renameSync(build, `${build}.away`);
    try {
      const r = run(process.execPath, ['smoke.mjs']);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain('The addon has not been built');
      expect(r.stderr).toContain('Run `npm rebuild @dtorch/common` in your project');
      expect(r.stderr).toContain('`npm install-scripts approve @dtorch/common zeromq protobufjs`');
    } finally {
      renameSync(`${build}.away`, build);
    }
  });
});
