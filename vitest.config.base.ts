// Shared vitest settings; each package's vitest.config.ts re-exports this in one line.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**'],
    // one forked process per file: each file gets its own engine and worker threads
    pool: 'forks',
    // lets tests drive the garbage collector (the FinalizationRegistry safety net)
    execArgv: ['--expose-gc'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
  },
});
