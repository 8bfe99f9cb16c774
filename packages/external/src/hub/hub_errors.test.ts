// The hub's refusals and failures as DTorchErrors naming the repository and the file; the token
// sent as a header and never printed nor part of a message.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { DTorchError } from '@dtorch/common';
import { startFakeHub, type FakeHub } from '../../test/fake_hub.js';
import { captureOutput, isolateHubEnv, tempDir } from '../../test/hub_env.js';
import { REPO_ID, tinyRepo } from '../../test/tiny_repo.js';
import { openRepo } from './open_repo.js';

const TOKEN = 'hf_SeCrEtT0kEn1234567890';

// The error `task` throws, with what it printed meanwhile; fails when it throws nothing.
async function failure(task: () => Promise<unknown>): Promise<{ err: DTorchError; output: string }> {
  const { error, output } = await captureOutput(task);
  expect(error).toBeInstanceOf(DTorchError);
  return { err: error as DTorchError, output };
}

// The token is in none of: the message, the stack, the printed output.
function expectNoToken(err: DTorchError, output: string, token = TOKEN): void {
  expect(err.message).not.toContain(token);
  expect(String(err.stack)).not.toContain(token);
  expect(JSON.stringify(err)).not.toContain(token);
  expect(output).not.toContain(token);
}

let hub: FakeHub;
let gated: FakeHub; // tokenizer.json 401 (gated), config.json 404 (listed, then gone)
let locked: FakeHub; // every request needs the token
beforeAll(async () => {
  hub = await startFakeHub({ repos: [tinyRepo()] });
  gated = await startFakeHub({ repos: [tinyRepo()], fileStatus: { 'tokenizer.json': 401, 'config.json': 404 } });
  locked = await startFakeHub({ repos: [tinyRepo()], token: TOKEN });
});
afterAll(async () => {
  await Promise.all([hub.close(), gated.close(), locked.close()]);
});
beforeEach(() => {
  isolateHubEnv();
  for (const h of [hub, gated, locked]) h.requests.length = 0;
});
afterEach(() => {
  vi.unstubAllEnvs();
});

describe('hub errors', () => {
  it('a repository the hub does not have is NOT_FOUND naming it', async () => {
    const { err } = await failure(() => openRepo('tiny-org/no-such-model', { cacheDir: tempDir('cache'), hubUrl: hub.url }));
    expect(err.code).toBe('NOT_FOUND');
    expect(err.message).toContain('tiny-org/no-such-model@main');
    expect(err.message).toContain('has no repository tiny-org/no-such-model (the hub answered 404');
    expect(err.message).toContain('set HF_TOKEN or pass options.token');
  });

  it('a revision the hub does not have is NOT_FOUND naming it', async () => {
    const { err } = await failure(() => openRepo(REPO_ID, { cacheDir: tempDir('cache'), hubUrl: hub.url, revision: 'no-such-branch' }));
    expect(err.code).toBe('NOT_FOUND');
    expect(err.message).toContain(`${REPO_ID} has no revision no-such-branch (the hub answered 404`);
  });

  it('a file the listing lacks is NOT_FOUND with no request made', async () => {
    const repo = await openRepo(REPO_ID, { cacheDir: tempDir('cache'), hubUrl: hub.url });
    hub.requests.length = 0;
    const { err } = await failure(() => repo.fetch(['config.json', 'model.safetensors.index.json']));
    expect(err.code).toBe('NOT_FOUND');
    expect(err.message).toMatch(new RegExp(`^${REPO_ID}@main has no file model.safetensors.index.json`));
    expect(hub.requests).toEqual([]);
  });

  it('a file the hub answers 404 for is NOT_FOUND naming the repository and the file', async () => {
    const repo = await openRepo(REPO_ID, { cacheDir: tempDir('cache'), hubUrl: gated.url, token: TOKEN });
    const { err, output } = await failure(() => repo.fetch(['config.json']));
    expect(err.code).toBe('NOT_FOUND');
    expect(err.message).toMatch(new RegExp(`^${REPO_ID}@main has no file config.json \\(the hub answered 404`));
    expectNoToken(err, output);
  });

  it('a gated file (401) is ACCESS_DENIED naming the repository and the file, saying a token is needed', async () => {
    const repo = await openRepo(REPO_ID, { cacheDir: tempDir('cache'), hubUrl: gated.url });
    const { err } = await failure(() => repo.fetch(['tokenizer.json']));
    expect(err.code).toBe('ACCESS_DENIED');
    expect(err.message).toContain(`tokenizer.json of ${REPO_ID}@main`);
    expect(err.message).toContain('the hub answered 401');
    expect(err.message).toContain('gated or private');
    expect(err.message).toContain('a token is needed: set HF_TOKEN or pass options.token');
    expect(err.message).toContain(`${gated.url}/${REPO_ID}`);
    // with a token sent, the message says it was refused, and does not show it
    const withToken = await openRepo(REPO_ID, { cacheDir: tempDir('cache'), hubUrl: gated.url, token: TOKEN });
    const refused = await failure(() => withToken.fetch(['tokenizer.json']));
    expect(refused.err.code).toBe('ACCESS_DENIED');
    expect(refused.err.message).toContain('the token sent was refused');
    expectNoToken(refused.err, refused.output);
  });

  it('sends the token as `Authorization: Bearer` to the hub (not to the CDN), from options, HF_TOKEN or the token file', async () => {
    const bearer = `Bearer ${TOKEN}`;
    const denied = await failure(() => openRepo(REPO_ID, { cacheDir: tempDir('cache'), hubUrl: locked.url }));
    expect(denied.err.code).toBe('ACCESS_DENIED');
    expect(denied.err.message).toContain(`the repository ${REPO_ID}`);

    locked.requests.length = 0;
    const repo = await openRepo(REPO_ID, { cacheDir: tempDir('cache'), hubUrl: locked.url, token: TOKEN });
    await repo.fetch(['config.json', 'model.safetensors']);
    const toHub = locked.requests.filter((r) => r.route !== 'cdn');
    expect(new Set(toHub.map((r) => r.route))).toEqual(new Set(['info', 'paths-info', 'resolve']));
    expect(toHub.every((r) => r.authorization === bearer)).toBe(true);
    // the LFS redirect leaves for another host: the token stays behind
    const toCdn = locked.requests.filter((r) => r.route === 'cdn');
    expect(toCdn.length).toBeGreaterThan(0);
    expect(toCdn.every((r) => r.authorization === undefined)).toBe(true);

    locked.requests.length = 0;
    vi.stubEnv('HF_TOKEN', TOKEN);
    await openRepo(REPO_ID, { cacheDir: tempDir('cache'), hubUrl: locked.url });
    expect(locked.requests.map((r) => r.authorization)).toEqual([bearer]);

    // `hf auth login` writes HF_HOME/token
    vi.stubEnv('HF_TOKEN', undefined);
    const home = tempDir('hf-home');
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, 'token'), `${TOKEN}\n`);
    vi.stubEnv('HF_HOME', home);
    locked.requests.length = 0;
    await openRepo(REPO_ID, { cacheDir: tempDir('cache'), hubUrl: locked.url });
    expect(locked.requests.map((r) => r.authorization)).toEqual([bearer]);

    // options.token wins over HF_TOKEN; a token need not start with hf_ (the library would refuse it)
    const other = await startFakeHub({ repos: [tinyRepo()], token: 'plain-token' });
    vi.stubEnv('HF_TOKEN', TOKEN);
    await openRepo(REPO_ID, { cacheDir: tempDir('cache'), hubUrl: other.url, token: 'plain-token' });
    expect(other.requests.map((r) => r.authorization)).toEqual(['Bearer plain-token']);
    await other.close();
  });

  it('a refused token is ACCESS_DENIED, and the token is in no message or output', async () => {
    const wrong = 'hf_WrOnGt0kEn0987654321';
    const { err, output } = await failure(() => openRepo(REPO_ID, { cacheDir: tempDir('cache'), hubUrl: locked.url, token: wrong }));
    expect(err.code).toBe('ACCESS_DENIED');
    expect(err.message).toContain('the token sent was refused');
    expectNoToken(err, output, wrong);
  });

  it('a cache folder that cannot be written is BAD_FILE naming the repository, not a hub error', async () => {
    const blocker = join(tempDir('cache'), 'a-file');
    writeFileSync(blocker, 'not a folder');
    const repo = await openRepo(REPO_ID, { cacheDir: join(blocker, 'hub'), hubUrl: hub.url });
    const { err } = await failure(() => repo.fetch(['config.json']));
    expect(err.code).toBe('BAD_FILE');
    expect(err.message).toMatch(new RegExp(`^could not write ${REPO_ID}@main into the HF cache \\(ENOTDIR on mkdir`));
    expect(err.message).toContain('give another cacheDir');
  });

  it('a hub that cannot be reached is NETWORK_ERROR naming its URL, suggesting offline mode when the cache has the files', async () => {
    const gone = await startFakeHub({ repos: [tinyRepo()] });
    await gone.close();
    const cacheDir = tempDir('cache');
    const { err, output } = await failure(() => openRepo(REPO_ID, { cacheDir, hubUrl: gone.url, token: TOKEN }));
    expect(err.code).toBe('NETWORK_ERROR');
    expect(err.message).toContain(`could not reach the hub at ${gone.url} for ${REPO_ID}@main (ECONNREFUSED)`);
    expect(err.message).not.toContain('localFilesOnly');
    expectNoToken(err, output);

    await (await openRepo(REPO_ID, { cacheDir, hubUrl: hub.url })).fetch(['config.json']);
    const cached = await failure(() => openRepo(REPO_ID, { cacheDir, hubUrl: gone.url, token: TOKEN }));
    expect(cached.err.code).toBe('NETWORK_ERROR');
    expect(cached.err.message).toContain(`The HF cache holds ${REPO_ID}@main: pass localFilesOnly: true or set HF_HUB_OFFLINE=1`);
    expectNoToken(cached.err, cached.output);
  });
});
