#!/usr/bin/env node
// Sums vitest's "Tests  N passed | M skipped (T)" lines and ctest's "... tests failed out of T"
// lines from a log into one closing line:
// "tests: N passed, F failed, S skipped". Exits 1 when no test ran or any failed.
import { readFileSync } from 'node:fs';

const text = readFileSync(process.argv[2], 'utf8').replace(/\x1b\[[0-9;]*m/g, '');
const totals = { passed: 0, failed: 0, skipped: 0 };
for (const line of text.split('\n')) {
  const ctest = /\d+% tests passed, (\d+) tests failed out of (\d+)/.exec(line);
  if (ctest) {
    totals.failed += Number(ctest[1]);
    totals.passed += Number(ctest[2]) - Number(ctest[1]);
    continue;
  }
  const m = /\bTests\s+(.*)\(\d+\)\s*$/.exec(line);
  if (!m) continue;
  for (const part of m[1].split('|')) {
    const [, n, kind] = /(\d+)\s+(passed|failed|skipped)/.exec(part) ?? [];
    if (kind) totals[kind] += Number(n);
  }
}
console.log(`tests: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
if (totals.passed === 0 || totals.failed > 0) process.exit(1);
