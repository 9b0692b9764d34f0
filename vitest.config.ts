import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    testTimeout: 30_000,
    projects: [
      {
        extends: true,
        test: { name: 'suite', include: ['test/**/*.test.ts'], exclude: ['test/limiter/fault/**', 'test/model/faults.test.ts'], sequence: { groupOrder: 0 } },
      },
      {
        // The chaos tests measure latencies in ms: they run after the rest, so the suite's own load
        // does not count against the store's deadline.
        extends: true,
        test: { name: 'fault', include: ['test/limiter/fault/**/*.test.ts', 'test/model/faults.test.ts'], sequence: { groupOrder: 1 }, fileParallelism: false },
      },
    ],
  },
});
