// The hub adapter against a fake hub on 127.0.0.1: the HF cache layout written (checked once by
// hand against Python's huggingface_hub 1.33: hf_hub_download into a second cache from this fake
// hub gave the same blobs/, refs/ and snapshots/ links, and hf_hub_download(local_files_only=True)
// and scan_cache_dir read this one with no warning), no second download, revisions, offline mode.
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { DTorchError } from '@dtorch/common';
import { gitBlobSha1, sha256Hex, startFakeHub } from '../../test/fake_hub.js';
import { captureOutput, tempDir, useFakeHub } from '../../test/hub_env.js';
import { MAIN_COMMIT, REPO_ID, V1_COMMIT, tinyFiles, tinyRepo } from '../../test/tiny_repo.js';
import { readSafetensorsHeader } from '../safetensors.js';
import { HubRepoFiles } from './hub_repo_files.js';
import { openRepo } from './open_repo.js';

const ALL = ['config.json', 'model.safetensors', 'tokenizer.json', 'text_encoder/config.json'];
const FOLDER = 'models--tiny-org--tiny-model';

// Every entry under `dir`: 'path/' for a folder, 'path -> target' for a link, 'path' for a file.
function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (at: string) => {
    for (const name of readdirSync(at)) {
      const full = join(at, name);
      const rel = relative(dir, full);
      const st = lstatSync(full);
      if (st.isSymbolicLink()) out.push(`${rel} -> ${readlinkSync(full)}`);
      else if (st.isDirectory()) {
        out.push(`${rel}/`);
        walk(full);
      } else out.push(rel);
    }
  };
  walk(dir);
  return out.sort();
}

const file = (path: string) => tinyFiles().find((f) => f.path === path)!;
// the blob name Python gives: sha256 for an LFS file, the git blob sha1 else
const blobOf = (path: string) => (file(path).lfs ? sha256Hex(file(path).content) : gitBlobSha1(file(path).content));

const fake = useFakeHub(() => [tinyRepo()]);

describe('hub repositories in the HF cache', () => {
  it('lists the files at the revision with one call and downloads nothing until asked', async () => {
    const cacheDir = tempDir('cache');
    const repo = await openRepo(REPO_ID, { cacheDir, hubUrl: fake.hub.url });
    expect(repo).toBeInstanceOf(HubRepoFiles);
    expect(repo.description).toBe(`${REPO_ID}@main`);
    expect(repo.root).toBe(join(cacheDir, FOLDER, 'snapshots', MAIN_COMMIT));
    expect(repo.list()).toEqual([...ALL].sort());
    expect(repo.has('model.safetensors')).toBe(true);
    expect(repo.has('model.safetensors.index.json')).toBe(false);
    expect(fake.hub.requests.map((r) => `${r.method} ${r.route} ${r.path}`)).toEqual([`GET info /api/models/${REPO_ID}/revision/main`]);
    expect(existsSync(join(cacheDir, FOLDER))).toBe(false);
  });

  it('writes blobs/, refs/main and snapshots/<commit>/ links exactly as huggingface_hub does', async () => {
    const cacheDir = tempDir('cache');
    const repo = await openRepo(REPO_ID, { cacheDir, hubUrl: fake.hub.url });
    const paths = await repo.fetch(ALL);
    expect(paths).toEqual(ALL.map((p) => join(cacheDir, FOLDER, 'snapshots', MAIN_COMMIT, p)));
    expect(tree(cacheDir)).toEqual([
      `${FOLDER}/`,
      `${FOLDER}/blobs/`,
      `${FOLDER}/blobs/57553454f07a8e0f3645702747859332cbc43441`,
      `${FOLDER}/blobs/60bc01b195a075b08711a6b380583f3d4e2743ae`,
      `${FOLDER}/blobs/e4edecfe57339a10c3f69cfdec837fff033da7eb4687147488494dc9ed63d2a6`,
      `${FOLDER}/blobs/e5e8081090d8306e5cd6f44b5edcda7008dda3be`,
      `${FOLDER}/refs/`,
      `${FOLDER}/refs/main`,
      `${FOLDER}/snapshots/`,
      `${FOLDER}/snapshots/${MAIN_COMMIT}/`,
      `${FOLDER}/snapshots/${MAIN_COMMIT}/config.json -> ../../blobs/60bc01b195a075b08711a6b380583f3d4e2743ae`,
      `${FOLDER}/snapshots/${MAIN_COMMIT}/model.safetensors -> ../../blobs/e4edecfe57339a10c3f69cfdec837fff033da7eb4687147488494dc9ed63d2a6`,
      `${FOLDER}/snapshots/${MAIN_COMMIT}/text_encoder/`,
      `${FOLDER}/snapshots/${MAIN_COMMIT}/text_encoder/config.json -> ../../../blobs/57553454f07a8e0f3645702747859332cbc43441`,
      `${FOLDER}/snapshots/${MAIN_COMMIT}/tokenizer.json -> ../../blobs/e5e8081090d8306e5cd6f44b5edcda7008dda3be`,
    ]);
    // the names are the hub's ids of the bytes: sha256 of an LFS file, git's blob sha1 of a small one
    for (const p of ALL) expect(readlinkSync(join(repo.root, p)).endsWith(`/blobs/${blobOf(p)}`)).toBe(true);
    expect(readFileSync(join(cacheDir, FOLDER, 'refs', 'main'), 'utf8')).toBe(MAIN_COMMIT);
    for (const p of ALL) expect(new Uint8Array(readFileSync(join(repo.root, p)))).toEqual(file(p).content);
    expect([...readSafetensorsHeader(join(repo.root, 'model.safetensors')).tensors.keys()]).toEqual(['linear.weight']);
    // one body per file: small files from resolve, the LFS file from the CDN it redirects to
    for (const p of ['config.json', 'tokenizer.json', 'text_encoder/config.json']) expect(fake.hub.count('resolve', { file: p, body: true })).toBe(1);
    expect(fake.hub.count('cdn', { file: 'model.safetensors', body: true })).toBe(1);
  });

  it('never downloads a cached file again: a new openRepo fetches it with no request for its bytes', async () => {
    const cacheDir = tempDir('cache');
    await (await openRepo(REPO_ID, { cacheDir, hubUrl: fake.hub.url })).fetch(['config.json', 'model.safetensors']);
    fake.hub.requests.length = 0;
    const again = await openRepo(REPO_ID, { cacheDir, hubUrl: fake.hub.url });
    const paths = await again.fetch(['config.json', 'model.safetensors', 'config.json']);
    expect(paths).toEqual(['config.json', 'model.safetensors', 'config.json'].map((p) => join(again.root, p)));
    // the revision's listing (metadata) only
    expect(fake.hub.requests.map((r) => r.route)).toEqual(['info']);
    // a file not fetched yet is downloaded, once
    await again.fetch(['tokenizer.json']);
    expect(fake.hub.count('resolve', { file: 'tokenizer.json', body: true })).toBe(1);
    expect(fake.hub.count('resolve', { file: 'config.json' })).toBe(0);
  });

  it('resolves another revision to its own snapshot and writes refs/<revision>; shared bytes are one blob', async () => {
    const cacheDir = tempDir('cache');
    await (await openRepo(REPO_ID, { cacheDir, hubUrl: fake.hub.url })).fetch(ALL);
    fake.hub.requests.length = 0;
    const v1 = (await openRepo(REPO_ID, { cacheDir, hubUrl: fake.hub.url, revision: 'v1' })) as HubRepoFiles;
    expect(v1.description).toBe(`${REPO_ID}@v1`);
    expect(v1.commit).toBe(V1_COMMIT);
    await v1.fetch(ALL);
    expect(readFileSync(join(cacheDir, FOLDER, 'refs', 'v1'), 'utf8')).toBe(V1_COMMIT);
    expect(readFileSync(join(cacheDir, FOLDER, 'refs', 'main'), 'utf8')).toBe(MAIN_COMMIT);
    expect(readFileSync(join(v1.root, 'config.json'), 'utf8')).toContain('"hidden_size":4');
    expect(readlinkSync(join(v1.root, 'model.safetensors'))).toBe(`../../blobs/${blobOf('model.safetensors')}`);
    // only v1's new config.json has bytes sent; the rest were blobs already
    expect(fake.hub.requests.filter((r) => (r.route === 'resolve' || r.route === 'cdn') && r.method === 'GET' && r.range !== 'bytes=0-0').map((r) => r.file)).toEqual(['config.json']);
    expect(fake.hub.requests.filter((r) => r.route === 'paths-info').every((r) => r.path.endsWith(`/paths-info/${V1_COMMIT}`))).toBe(true);
  });

  it('takes a commit hash as the revision, writing no ref', async () => {
    const cacheDir = tempDir('cache');
    const repo = await openRepo(REPO_ID, { cacheDir, hubUrl: fake.hub.url, revision: V1_COMMIT });
    await repo.fetch(['config.json']);
    expect(repo.root).toBe(join(cacheDir, FOLDER, 'snapshots', V1_COMMIT));
    expect(existsSync(join(cacheDir, FOLDER, 'refs'))).toBe(false);
  });

  it('downloads two files with the same bytes at once into one blob (downloads into a cache folder take turns)', async () => {
    const vocab = new Uint8Array(Buffer.from(JSON.stringify({ vocab: Array.from({ length: 2000 }, (_, i) => `token${i}`) })));
    const twin = await startFakeHub({
      repos: [{ id: 'tiny-org/twins', revisions: { main: { commit: MAIN_COMMIT, files: [
        { path: 'tokenizer/vocab.json', content: vocab },
        { path: 'tokenizer_2/vocab.json', content: vocab },
      ] } } }],
    });
    const cacheDir = tempDir('cache');
    const [a, b] = await Promise.all([openRepo('tiny-org/twins', { cacheDir, hubUrl: twin.url }), openRepo('tiny-org/twins', { cacheDir, hubUrl: twin.url })]);
    const [[pa], [pb]] = await Promise.all([a.fetch(['tokenizer/vocab.json']), b.fetch(['tokenizer_2/vocab.json'])]);
    expect(new Uint8Array(readFileSync(pa!))).toEqual(vocab);
    expect(new Uint8Array(readFileSync(pb!))).toEqual(vocab);
    expect(readdirSync(join(cacheDir, 'models--tiny-org--twins', 'blobs'))).toEqual([gitBlobSha1(vocab)]);
    // the second found the blob there and only linked it
    expect(twin.count('resolve', { body: true })).toBe(1);
    await twin.close();
  });

  it('downloads a file the hub offers through xet over plain HTTP, never calling xet', async () => {
    const xetHub = await startFakeHub({ repos: [tinyRepo()], xet: true });
    const cacheDir = tempDir('cache');
    const [path] = await (await openRepo(REPO_ID, { cacheDir, hubUrl: xetHub.url })).fetch(['model.safetensors']);
    expect(new Uint8Array(readFileSync(path!))).toEqual(file('model.safetensors').content);
    expect(readlinkSync(path!)).toBe(`../../blobs/${blobOf('model.safetensors')}`);
    // the probe was offered xet; the bytes then came by the redirect to the CDN, and no xet route was asked
    expect(xetHub.requests.some((r) => r.accept?.includes('application/vnd.xet-fileinfo+json'))).toBe(true);
    expect(xetHub.count('cdn', { body: true })).toBe(1);
    expect(xetHub.count('other')).toBe(0);
    await xetHub.close();
  });

  it('prints nothing while downloading when stderr is not a terminal and no callback is given', async () => {
    const tty = Object.getOwnPropertyDescriptor(process.stderr, 'isTTY');
    Object.defineProperty(process.stderr, 'isTTY', { value: false, configurable: true });
    try {
      const cacheDir = tempDir('cache');
      const { error, output } = await captureOutput(async () => (await openRepo(REPO_ID, { cacheDir, hubUrl: fake.hub.url })).fetch(ALL));
      expect(error).toBeUndefined();
      expect(output).toBe('');
    } finally {
      if (tty) Object.defineProperty(process.stderr, 'isTTY', tty);
      else delete (process.stderr as { isTTY?: boolean }).isTTY;
    }
  });
});

describe('offline (localFilesOnly, HF_HUB_OFFLINE=1)', () => {
  it('resolves from the cache with no request at all, even with the hub gone', async () => {
    const cacheDir = tempDir('cache');
    const online = await openRepo(REPO_ID, { cacheDir, hubUrl: fake.hub.url });
    await online.fetch(['config.json', 'model.safetensors', 'text_encoder/config.json']);
    const other = await startFakeHub({ repos: [tinyRepo()] });
    await other.close();
    fake.hub.requests.length = 0;

    const repo = await openRepo(REPO_ID, { cacheDir, hubUrl: other.url, localFilesOnly: true });
    expect(repo.root).toBe(online.root);
    // what the snapshot holds
    expect(repo.list()).toEqual(['config.json', 'model.safetensors', 'text_encoder/config.json']);
    expect(repo.has('tokenizer.json')).toBe(false);
    expect(await repo.fetch(['text_encoder/config.json'])).toEqual([join(online.root, 'text_encoder/config.json')]);

    vi.stubEnv('HF_HUB_OFFLINE', '1');
    const byEnv = await openRepo(REPO_ID, { cacheDir });
    expect((byEnv as HubRepoFiles).offline).toBe(true);
    expect(await byEnv.fetch(['config.json'])).toEqual([join(online.root, 'config.json')]);
    expect(fake.hub.requests).toEqual([]);
  });

  it('says a file is not in the cache and that offline mode is on, and how to turn it off', async () => {
    const cacheDir = tempDir('cache');
    await (await openRepo(REPO_ID, { cacheDir, hubUrl: fake.hub.url })).fetch(['config.json']);
    fake.hub.requests.length = 0;
    const repo = await openRepo(REPO_ID, { cacheDir, localFilesOnly: true });
    const err = await repo.fetch(['tokenizer.json']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DTorchError);
    expect((err as DTorchError).code).toBe('NOT_FOUND');
    expect((err as DTorchError).message).toMatch(new RegExp(`^${REPO_ID}@main: tokenizer.json is not in the HF cache .* offline mode is on \\(localFilesOnly: true\\); turn it off`));

    vi.stubEnv('HF_HUB_OFFLINE', '1');
    const absent = await openRepo('tiny-org/never-downloaded', { cacheDir }).catch((e: unknown) => e);
    expect((absent as DTorchError).code).toBe('NOT_FOUND');
    expect((absent as DTorchError).message).toContain('tiny-org/never-downloaded@main is not in the HF cache');
    expect((absent as DTorchError).message).toContain('offline mode is on (HF_HUB_OFFLINE=1)');
    expect(fake.hub.requests).toEqual([]);
  });

  it('reads a cache laid out by Python (refs/main, snapshots/<sha>/file -> ../../blobs/<hash>)', async () => {
    const cacheDir = tempDir('py-cache');
    const storage = join(cacheDir, 'models--py-org--py-model');
    const commit = 'f'.repeat(40);
    const blobs = { config: 'a'.repeat(40), weights: 'b'.repeat(64), nested: 'c'.repeat(40) };
    mkdirSync(join(storage, 'blobs'), { recursive: true });
    mkdirSync(join(storage, 'refs'), { recursive: true });
    mkdirSync(join(storage, 'snapshots', commit, 'unet'), { recursive: true });
    writeFileSync(join(storage, 'blobs', blobs.config), '{"a":1}');
    writeFileSync(join(storage, 'blobs', blobs.weights), 'weights');
    writeFileSync(join(storage, 'blobs', blobs.nested), '{"b":2}');
    writeFileSync(join(storage, 'refs', 'main'), commit);
    symlinkSync(`../../blobs/${blobs.config}`, join(storage, 'snapshots', commit, 'model_index.json'));
    symlinkSync(`../../blobs/${blobs.weights}`, join(storage, 'snapshots', commit, '.gitattributes'));
    symlinkSync(`../../../blobs/${blobs.nested}`, join(storage, 'snapshots', commit, 'unet', 'config.json'));
    symlinkSync('../../blobs/missing', join(storage, 'snapshots', commit, 'dangling.json'));

    vi.stubEnv('HF_HUB_CACHE', cacheDir);
    vi.stubEnv('HF_HUB_OFFLINE', 'true');
    const repo = await openRepo('py-org/py-model');
    expect(repo.root).toBe(join(storage, 'snapshots', commit));
    expect(repo.list()).toEqual(['.gitattributes', 'model_index.json', 'unet/config.json']);
    expect(repo.has('dangling.json')).toBe(false);
    const [index, unet] = await repo.fetch(['model_index.json', 'unet/config.json']);
    expect(readFileSync(index!, 'utf8')).toBe('{"a":1}');
    expect(readFileSync(unet!, 'utf8')).toBe('{"b":2}');
    // a commit hash needs no ref
    const byCommit = await openRepo('py-org/py-model', { revision: commit });
    expect(byCommit.root).toBe(repo.root);
  });
});
