// Shared vitest settings; each package's vitest.config.ts re-exports this in one line.
import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// vitest runs a forked process per file on every core but one, and each process's engine would
// give its CPU worker every core for LibTorch's intra-op threads: on 16 cores, 15 × 16 OpenMP
// threads, and a loop of small ops waits on descheduled threads (60 s for what takes 1 s alone).
// Each process gets its share of the cores instead, unless DTORCH_INTRAOP_THREADS says otherwise.
const cores = availableParallelism();
const intraOpThreads = process.env['DTORCH_INTRAOP_THREADS'] ?? String(Math.max(1, Math.floor(cores / Math.max(1, cores - 1))));

export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**'],
    // one forked process per file: each file gets its own engine and worker threads
    pool: 'forks',
    // lets tests drive the garbage collector (the FinalizationRegistry safety net)
    execArgv: ['--expose-gc'],
    env: { DTORCH_INTRAOP_THREADS: intraOpThreads },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
