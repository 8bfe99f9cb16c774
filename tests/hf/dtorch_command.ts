// The `dtorch` command run as a child process, as a user runs it (node packages/hf/dist/cli/main.js
// ...), offline and with a time bound; and the check that an error run is one line and exit code 1.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

/** The command's entry, built by `npm run build`. */
export const main = fileURLToPath(new URL('../../packages/hf/dist/cli/main.js', import.meta.url));

/** What a run gave. */
export interface Run {
  /** The exit code; null when the time bound killed it. */
  status: number | null;
  stdout: string;
  stderr: string;
  /** Seconds it ran. */
  seconds: number;
}

/** Throws unless @dtorch/hf is built. */
export function checkBuilt(): void {
  if (!existsSync(main)) throw new Error(`${main} is missing: build @dtorch/hf first (npm run build)`);
}

/**
 * Runs `dtorch args` with HF_HOME under `work`, offline, DTORCH_LOG unset (then `env` on top);
 * killed after `timeoutMs` (status null), so a run that hangs or grows without end fails the test.
 */
export function dtorch(work: string, args: string[], env: Record<string, string> = {}, timeoutMs = 120_000): Run {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, HF_HOME: join(work, 'hf-home'), HF_HUB_OFFLINE: '1' };
  delete childEnv['DTORCH_LOG'];
  Object.assign(childEnv, env);
  const started = performance.now();
  const r = spawnSync(process.execPath, [main, ...args], { env: childEnv, encoding: 'utf8', timeout: timeoutMs, killSignal: 'SIGKILL' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, seconds: (performance.now() - started) / 1000 };
}

/** An error run: exit code 1, and stderr one line starting `error: `, with no stack. */
export function expectOneLineError(r: Run, pattern: RegExp): void {
  expect(r.status, r.stderr).toBe(1);
  const lines = r.stderr.trimEnd().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^error: /);
  expect(lines[0]).toMatch(pattern);
}
