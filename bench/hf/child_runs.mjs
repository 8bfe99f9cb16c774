// What the bench/hf harnesses share: each side runs in a child process of its own, under one
// time budget for the whole run, and reports JSON lines; a child that fails or runs past the
// budget gives one line with the error. The diffusers side runs the machine's Python with
// diffusers' source on PYTHONPATH.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** A budget of `budgetS` seconds from now, and `run` that spends it on child processes. */
export function childRuns(budgetS, fields) {
  const started = Date.now();
  const left = () => budgetS - (Date.now() - started) / 1000;
  const elapsedS = () => (Date.now() - started) / 1000;
  // a child's JSON lines, and a line with `fields`, `what` and the error when it failed
  const run = (command, args, env, what) => {
    const timeout = Math.round(Math.max(1, left()) * 1000); // spawnSync takes whole milliseconds only
    const r = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 1 << 26, env: { ...process.env, ...env }, timeout, killSignal: 'SIGKILL' });
    const lines = (r.stdout ?? '').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
    if (r.status !== 0 && !lines.some((l) => l.error)) {
      const why = r.error ? String(r.error.message) : r.signal ? `killed by ${r.signal} (BUDGET_S ${budgetS} reached?)` : `exit ${r.status}`;
      lines.push({ ...fields, ...what, error: `${why}: ${(r.stderr ?? '').trim().split('\n').slice(-4).join(' | ').slice(0, 600)}` });
    }
    return lines;
  };
  return { left, elapsedS, run };
}

/**
 * The Python of the diffusers side (PYTHON, else the repository's .venv, else python3) and its
 * environment: DIFFUSERS_SRC (the folder holding the `diffusers` package; else the first of
 * /tmp/diffusers-src/src, /tmp/diffusers-src, /work/diffusers-src/src that holds it) on PYTHONPATH.
 */
export function diffusersPython(root) {
  const python = process.env.PYTHON ?? (existsSync(join(root, '.venv', 'bin', 'python')) ? join(root, '.venv', 'bin', 'python') : 'python3');
  const src = process.env.DIFFUSERS_SRC ?? ['/tmp/diffusers-src/src', '/tmp/diffusers-src', '/work/diffusers-src/src'].find((d) => existsSync(join(d, 'diffusers', '__init__.py')));
  const env = { PYTHONUNBUFFERED: '1', ...(src ? { DIFFUSERS_SRC: src, PYTHONPATH: [src, process.env.PYTHONPATH].filter(Boolean).join(':') } : {}) };
  return { python, env };
}
