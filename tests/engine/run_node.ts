// Runs a script (an ES module importing @dtorch/api) in a fresh node process from the tests
// folder, with `env` added to this process's environment (an undefined value removes a variable): for what a process does at its start
// (settings read once) or at its end (whether it can exit).
import { spawnSync } from 'node:child_process';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const testsDir = dirname(dirname(fileURLToPath(import.meta.url)));

export function runNode(script: string, env: Record<string, string | undefined>, timeoutMs = 20_000) {
  const started = Date.now();
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: testsDir,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: timeoutMs,
  });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr, ms: Date.now() - started };
}
