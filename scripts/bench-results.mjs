#!/usr/bin/env node
// Keeps a benchmark run: appends the JSON lines of FILE (what a bench printed) to
// bench/results/<bench>/<machine>.jsonl, each line led by the run's label, the date and the
// commit it was measured at. One file per benchmark and machine; git history keeps what a
// later run supersedes.
//   node scripts/bench-results.mjs --bench hf-diffusion --machine h200 --run s29 out.jsonl
// Options: --date (default today, UTC), --commit (default HEAD), --into (default bench/results). Lines that are not JSON objects
// (a stray log line) are refused, naming the line, and nothing is written.
import { execFileSync } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values, positionals } = parseArgs({
  options: { bench: { type: 'string' }, machine: { type: 'string' }, run: { type: 'string' }, date: { type: 'string' }, commit: { type: 'string' }, into: { type: 'string' } },
  allowPositionals: true,
});
const fail = (message) => {
  console.error(`bench-results: ${message}`);
  process.exit(1);
};
const name = /^[a-z0-9][a-z0-9.-]*$/;
for (const key of ['bench', 'machine', 'run']) {
  if (!values[key] || !name.test(values[key])) fail(`--${key} must be given as lowercase letters, digits, dots and dashes (got ${JSON.stringify(values[key])})`);
}
if (positionals.length === 0) fail('give the files of JSON lines to keep');
const date = values.date ?? new Date().toISOString().slice(0, 10);
const run = `${date}-${values.run}`;

// HEAD of the checkout, read only once the lines are good: a tree from `git archive` or a
// tarball has no git to ask, and then --commit says what was measured
function headCommit() {
  try {
    return execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch {
    return fail(`${root} is not a git checkout (or git is missing), so the commit measured is unknown: give --commit <sha>`);
  }
}

const records = [];
for (const file of positionals) {
  readFileSync(file, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if (!line.trim()) return;
      let record;
      try {
        record = JSON.parse(line);
      } catch {
        fail(`${file}:${i + 1} is not JSON: ${line.slice(0, 120)}`);
      }
      if (record === null || typeof record !== 'object' || Array.isArray(record)) fail(`${file}:${i + 1} is not a JSON object`);
      records.push(record);
    });
}
const commit = values.commit ?? headCommit();
// the bench's own pass numbering and time stamp keep their meaning under other names
const lines = records.map(({ run: trial, date: stamped, ...rest }) =>
  JSON.stringify({ run, date: stamped ?? date, commit, ...(trial === undefined ? {} : { trial }), ...rest }),
);
const target = join(values.into ?? join(root, 'bench', 'results'), values.bench, `${values.machine}.jsonl`);
mkdirSync(dirname(target), { recursive: true });
appendFileSync(target, lines.map((l) => `${l}\n`).join(''));
console.log(`bench-results: ${lines.length} records of run ${run} appended to ${target}`);
