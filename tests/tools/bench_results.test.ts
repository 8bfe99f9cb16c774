// scripts/bench-results.mjs keeps a benchmark run: it appends a bench's JSON lines to
// <results>/<bench>/<machine>.jsonl, each led by the run, the date and the commit, keeping a
// bench's own pass numbering (`run`) as `trial`; a line that is not a JSON object is refused and
// nothing is written. Every run here is as in a tree without git (`git archive`, an npm tarball):
// GIT_DIR names no repository, so these tests pass there too.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const script = fileURLToPath(new URL('../../scripts/bench-results.mjs', import.meta.url));
const dirs: string[] = [];
const scratch = () => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-results-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
// git finds no repository, whatever tree these tests run in
const noGit = { ...process.env, GIT_DIR: join(tmpdir(), 'bench-results-no-git', '.git') };

describe('bench-results', () => {
  it('appends each run to one file per bench and machine, led by run, date and commit', () => {
    const dir = scratch();
    const out = join(dir, 'out.jsonl');
    writeFileSync(out, '{"bench":"b","ms":1.5}\n\n{"bench":"b","run":3,"ms":2}\n');
    const run = (label: string) =>
      execFileSync(process.execPath, [script, '--bench', 'hf-x', '--machine', 'h200', '--run', label, '--date', '2026-12-02', '--commit', 'abc123', '--into', dir, out], { env: noGit });
    run('s1');
    run('s2');
    const lines = readFileSync(join(dir, 'hf-x', 'h200.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toEqual([
      { run: '2026-12-02-s1', date: '2026-12-02', commit: 'abc123', bench: 'b', ms: 1.5 },
      { run: '2026-12-02-s1', date: '2026-12-02', commit: 'abc123', trial: 3, bench: 'b', ms: 2 },
      { run: '2026-12-02-s2', date: '2026-12-02', commit: 'abc123', bench: 'b', ms: 1.5 },
      { run: '2026-12-02-s2', date: '2026-12-02', commit: 'abc123', trial: 3, bench: 'b', ms: 2 },
    ]);
  });

  it('refuses a line that is not a JSON object, and a bad name, writing nothing', () => {
    const dir = scratch();
    const out = join(dir, 'out.jsonl');
    writeFileSync(out, '{"ok":1}\nnode: warning\n');
    const bad = spawnSync(process.execPath, [script, '--bench', 'x', '--machine', 'h200', '--run', 's1', '--into', dir, out], { encoding: 'utf8', env: noGit });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('out.jsonl:2 is not JSON');
    const name = spawnSync(process.execPath, [script, '--bench', 'X/..', '--machine', 'h200', '--run', 's1', '--into', dir, out], { encoding: 'utf8', env: noGit });
    expect(name.status).toBe(1);
    expect(name.stderr).toContain('--bench must be given');
    expect(existsSync(join(dir, 'x'))).toBe(false);
  });

  it('outside a git checkout, asks for --commit in one line and writes nothing', () => {
    const dir = scratch();
    const out = join(dir, 'out.jsonl');
    writeFileSync(out, '{"ok":1}\n');
    const r = spawnSync(process.execPath, [script, '--bench', 'x', '--machine', 'h200', '--run', 's1', '--into', dir, out], { encoding: 'utf8', env: noGit });
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toMatch(/^bench-results: \S+ is not a git checkout \(or git is missing\), so the commit measured is unknown: give --commit <sha>$/);
    expect(existsSync(join(dir, 'x'))).toBe(false);
  });
});
