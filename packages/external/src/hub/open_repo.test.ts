// openRepo: which sources are folders and which are hub ids, the options it refuses, and where
// the cache and the hub are when the options do not say (HF's variables, Python's precedence).
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { DTorchError } from '@dtorch/common';
import { tempDir, useFakeHub } from '../../test/hub_env.js';
import { MAIN_COMMIT, REPO_ID, tinyRepo } from '../../test/tiny_repo.js';
import { defaultHubCacheDir } from './hub_env.js';
import { HubRepoFiles } from './hub_repo_files.js';
import { isHubRepoId, openRepo, type RepoOptions } from './open_repo.js';
import { LocalRepoFiles } from './repo_files.js';

const FOLDER = 'models--tiny-org--tiny-model';

const fake = useFakeHub(() => [tinyRepo()]);

async function codeOf(promise: Promise<unknown>): Promise<[string, string]> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(DTorchError);
  return [(err as DTorchError).code, (err as DTorchError).message];
}

describe('openRepo sources', () => {
  it('takes a path that exists as a local folder, even one shaped like a hub id', async () => {
    const dir = tempDir('local');
    mkdirSync(join(dir, 'org', 'name'), { recursive: true });
    writeFileSync(join(dir, 'org', 'name', 'config.json'), '{}');
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      const repo = await openRepo('org/name', { hubUrl: fake.hub.url });
      expect(repo).toBeInstanceOf(LocalRepoFiles);
      expect(repo.list()).toEqual(['config.json']);
    } finally {
      process.chdir(cwd);
    }
    expect(fake.hub.requests).toEqual([]);
  });

  it('knows hub ids by HF rules and refuses anything else as INVALID_ARGUMENT', async () => {
    for (const id of ['gpt2', 'org/name', 'Org-1/name_2.v3', 'a/b', '_x/y_']) expect(isHubRepoId(id)).toBe(true);
    for (const id of ['a/b/c', '/abs/missing', './rel/missing', 'org/-name', 'org/name.', 'a--b/c', 'a/b..c', 'org/name.git', 'café/x', 'org/', '/name', 'a b/c', 'x'.repeat(97)]) {
      expect(isHubRepoId(id), id).toBe(false);
    }
    const [code, message] = await codeOf(openRepo('./no/such/folder/here'));
    expect(code).toBe('INVALID_ARGUMENT');
    expect(message).toBe('"./no/such/folder/here" is neither a folder on this machine nor a hub id: a hub id is "name" or "org/name" ' +
      "of letters, digits, '-', '_' and '.' (at most 96 each, no '--' or '..'); give an existing folder or a hub id");
    expect((await codeOf(openRepo('')))[0]).toBe('INVALID_ARGUMENT');
    expect(fake.hub.requests).toEqual([]);
  });

  it('refuses bad options', async () => {
    expect(await codeOf(openRepo(REPO_ID, { revision: '../../etc' }))).toEqual(['INVALID_ARGUMENT',
      'Expected branch, tag or commit hash for options.revision but received "../../etc" of type string']);
    expect((await codeOf(openRepo(REPO_ID, { revision: '' })))[0]).toBe('INVALID_ARGUMENT');
    expect((await codeOf(openRepo(REPO_ID, { hubUrl: 'ftp://x' })))[1]).toContain('Expected http(s) URL for options.hubUrl');
    expect((await codeOf(openRepo(REPO_ID, { localFilesOnly: 'yes' as unknown as boolean })))[0]).toBe('INVALID_ARGUMENT');
    expect((await codeOf(openRepo(REPO_ID, { onProgress: 3 as unknown as () => void })))[0]).toBe('INVALID_ARGUMENT');
    const [code, message] = await codeOf(openRepo(REPO_ID, { local_files_only: true } as RepoOptions));
    expect(code).toBe('INVALID_ARGUMENT');
    expect(message).toContain('Unknown option "local_files_only" in openRepo options (did you mean localFilesOnly? options are camelCase)');
    const secret = 987654321;
    const bad = await codeOf(openRepo(REPO_ID, { token: secret as unknown as string }));
    expect(bad).toEqual(['INVALID_ARGUMENT', 'Expected a non-empty string for options.token but received a value of type number']);
    // a local folder too: a wrong option is an error whatever the source
    expect((await codeOf(openRepo(tempDir('folder'), { localFilesOnly: 'yes' as unknown as boolean })))[0]).toBe('INVALID_ARGUMENT');
    expect((await codeOf(openRepo(tempDir('folder'), { revision: '../x' })))[0]).toBe('INVALID_ARGUMENT');
    const repo = await openRepo(REPO_ID, { hubUrl: fake.hub.url, cacheDir: tempDir('cache') });
    expect((await codeOf(repo.fetch(['../escape.json'])))[0]).toBe('INVALID_ARGUMENT');
    expect((await codeOf(repo.fetch(['/etc/passwd'])))[0]).toBe('INVALID_ARGUMENT');
  });
});

describe('where the cache and the hub are', () => {
  it('cache dir: options.cacheDir, else HF_HUB_CACHE, else HF_HOME/fake.hub, else ~/.cache/huggingface/hub', async () => {
    expect(defaultHubCacheDir({})).toBe(join(homedir(), '.cache', 'huggingface', 'hub'));
    expect(defaultHubCacheDir({ HF_HOME: '/h' })).toBe('/h/hub');
    expect(defaultHubCacheDir({ HF_HOME: '/h', HF_HUB_CACHE: '/c' })).toBe('/c');
    expect(defaultHubCacheDir({ XDG_CACHE_HOME: '/x' })).toBe('/x/huggingface/hub');
    expect(defaultHubCacheDir({ HF_HOME: '~/hf' })).toBe(join(homedir(), 'hf', 'hub'));

    // and downloads land there
    const home = tempDir('home');
    const hubCache = tempDir('hub-cache');
    const explicit = tempDir('explicit');
    vi.stubEnv('HF_HOME', home);
    await (await openRepo(REPO_ID, { hubUrl: fake.hub.url })).fetch(['config.json']);
    expect(existsSync(join(home, 'hub', FOLDER, 'snapshots', MAIN_COMMIT, 'config.json'))).toBe(true);
    vi.stubEnv('HF_HUB_CACHE', hubCache);
    await (await openRepo(REPO_ID, { hubUrl: fake.hub.url })).fetch(['config.json']);
    expect(existsSync(join(hubCache, FOLDER, 'refs', 'main'))).toBe(true);
    const repo = await openRepo(REPO_ID, { hubUrl: fake.hub.url, cacheDir: explicit });
    expect((repo as HubRepoFiles).cacheDir).toBe(explicit);
    await repo.fetch(['config.json']);
    expect(existsSync(join(explicit, FOLDER, 'snapshots', MAIN_COMMIT, 'config.json'))).toBe(true);
  });

  it('hub: options.hubUrl, else HF_ENDPOINT (a trailing / dropped)', async () => {
    vi.stubEnv('HF_ENDPOINT', `${fake.hub.url}/`);
    const repo = await openRepo(REPO_ID, { cacheDir: tempDir('cache') });
    expect(repo.list()).toContain('config.json');
    expect(fake.hub.requests.map((r) => r.path)).toEqual([`/api/models/${REPO_ID}/revision/main`]);
    vi.stubEnv('HF_ENDPOINT', 'http://127.0.0.1:9');
    expect((await openRepo(REPO_ID, { cacheDir: tempDir('cache'), hubUrl: fake.hub.url })).list()).toContain('config.json');
  });
});
