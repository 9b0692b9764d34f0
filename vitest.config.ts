import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    testTimeout: 30_000,
    // Vitest's default is one worker per CPU less one: a single worker on a 2-vCPU machine, where
    // most of a test file's time is spent waiting on Redis, child processes and sockets. Two
    // workers took the suite from 421 s to 284 s here, all green (the chaos project below stays one
    // file at a time).
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: ['test/fault/**'], sequence: { groupOrder: 0 } },
      },
      {
        // The chaos tests measure latencies in ms: they run after the rest, so the suite's own load
        // does not count against the store's deadline.
        extends: true,
        test: { name: 'fault', include: ['test/fault/**/*.test.ts'], sequence: { groupOrder: 1 }, fileParallelism: false },
      },
    ],
  },
});
