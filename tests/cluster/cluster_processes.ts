// Real processes for the cluster tests: `dtorch worker` children on 127.0.0.1, each ended by the
// test (killed at the latest in stopAll), with their output and exit kept for the assertions.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const dtorchBin = join(root, 'packages', 'hf', 'bin', 'dtorch.js');

/** A child process and what it printed; `exited` resolves with its code and signal and the time it took from `since`. */
export interface Child {
  process: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

const children = new Set<ChildProcess>();

/** Starts `node args...` from the repository root with `env` added. */
export function startNode(args: string[], env: Record<string, string> = {}): Child {
  const child = spawn(process.execPath, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let text = '';
  child.stdout!.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.on('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal, at: Date.now() });
    }),
  );
  return { process: child, output: () => text, exited };
}

/** `dtorch worker --main <address> --devices <devices> [--token-file <file>]`, with `env` added to this process's. */
export function startWorker(address: string, options: { devices?: string; token?: string; env?: Record<string, string> } = {}): Child {
  const args = [dtorchBin, 'worker', '--main', address, '--devices', options.devices ?? 'cpu:0-1'];
  if (options.token !== undefined) args.push('--token-file', tokenFile(options.token));
  return startNode(args, options.env);
}

/** A file holding `token`, as --token-file reads it. */
export function tokenFile(token: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'dtorch-token-')), 'token');
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return file;
}

/** Waits until `output()` matches `pattern` (rejects after timeoutMs, with what was printed). */
export async function waitForOutput(child: Child, pattern: RegExp, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pattern.test(child.output())) {
    if (Date.now() > deadline) throw new Error(`no ${pattern} within ${timeoutMs} ms; printed:\n${child.output()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * `promise`, or a rejection naming `step` (and what `children` printed) once `ms` pass first: a
 * test of several waits then says which one hung, where its own timeout would not.
 */
export async function within<T>(step: string, ms: number, promise: Promise<T>, children: readonly Child[] = []): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const printed = children.map((c, i) => `child ${i} (pid ${c.process.pid}) printed:\n${c.output()}`).join('\n');
      reject(new Error(`${step}: not done within ${ms} ms${printed ? `\n${printed}` : ''}`));
    }, ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Kills every child still running (the tests' afterEach). */
export function stopAll(): void {
  for (const child of children) child.kill('SIGKILL');
  children.clear();
}
