// Test helpers for the hub adapter: an environment with no HF variable of the machine's own (a
// fresh HF_HOME, no token, no endpoint, online), and a capture of everything printed.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, vi } from 'vitest';
import { startFakeHub, type FakeHub, type FakeRepo } from './fake_hub.js';

export const HF_VARIABLES = [
  'HF_HOME', 'HF_HUB_CACHE', 'HUGGINGFACE_HUB_CACHE', 'XDG_CACHE_HOME', 'HF_TOKEN', 'HUGGING_FACE_HUB_TOKEN',
  'HF_TOKEN_PATH', 'HF_ENDPOINT', 'HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE', 'HF_HUB_DISABLE_PROGRESS_BARS',
];

/** A fresh temporary folder. */
export const tempDir = (prefix: string) => mkdtempSync(join(tmpdir(), `dtorch-${prefix}-`));

/** Clears every HF variable and points HF_HOME at a fresh folder (undone by vi.unstubAllEnvs). */
export function isolateHubEnv(): string {
  for (const name of HF_VARIABLES) vi.stubEnv(name, undefined);
  const home = tempDir('hf-home');
  vi.stubEnv('HF_HOME', home);
  return home;
}

/** Runs `task` with stdout, stderr and console captured; returns its result (or error) and the text. */
export async function captureOutput<T>(task: () => Promise<T>): Promise<{ result?: T; error?: unknown; output: string }> {
  const chunks: string[] = [];
  const keep = (...args: unknown[]) => {
    chunks.push(args.map(String).join(' '));
  };
  const spies = [
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk: unknown) => (keep(chunk), true)),
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: unknown) => (keep(chunk), true)),
    ...(['log', 'info', 'debug', 'warn', 'error'] as const).map((m) => vi.spyOn(console, m).mockImplementation(keep)),
  ];
  try {
    return { result: await task(), output: chunks.join('\n') };
  } catch (error) {
    return { error, output: chunks.join('\n') };
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
}

/**
 * A fake hub serving `repos` for the tests of this file, and before each test a fresh HF
 * environment (isolateHubEnv) and an empty request log. Read the hub through `.hub`.
 */
export function useFakeHub(repos: () => FakeRepo[]): { readonly hub: FakeHub } {
  let hub: FakeHub | undefined;
  beforeAll(async () => {
    hub = await startFakeHub({ repos: repos() });
  });
  afterAll(async () => {
    await hub?.close();
  });
  beforeEach(() => {
    isolateHubEnv();
    hub!.requests.length = 0;
  });
  afterEach(() => {
    vi.unstubAllEnvs();
  });
  return {
    get hub() {
      return hub!;
    },
  };
}
