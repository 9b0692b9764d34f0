import { defineConfig } from 'vitest/config';

/** Chaos tests: Redis killed, paused, failed over under load. */
const FAULT = ['test/limiter/fault/**/*.test.ts', 'test/model/faults.test.ts'];
/**
 * Run alone: exactness under floods from several processes, the docs' example apps, which keep
 * their default 50 ms deadline (a busy machine's slow first decision is answered by the failure mode),
 * and the deferred queue's take-over, timed by its minIdleMs.
 */
const LOAD = [
  'test/store/redis/exactness.test.ts',
  'test/store/memcached/exactness.test.ts',
  'test/scale/many-nodes.test.ts',
  'test/docs/migrating.test.ts',
  // A worker cut off from Redis for its minIdleMs, then back: its hand-over timing failed twice beside another file (15 s waits).
  'test/gateway/defer/takeover.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    // Most files wait on Redis, child processes and sockets more than they compute: two at a time,
    // even on 2 cores (the default there is one). The fault project runs its files one at a time.
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['test/**/*.test.ts'],
          exclude: [...FAULT, ...LOAD],
          sequence: { groupOrder: 0 },
          // A worker's files share one module graph: src/ and the test helpers are imported once per
          // worker, not once per file (~30% of the suite's CPU went to re-importing them). Tests
          // must not leave global state behind (fake timers, env, spies): each restores its own.
          isolate: false,
          // The Redis servers of useRedisTopologies, started once per worker instead of per file.
          globalSetup: ['test/support/redis-pool.setup.ts'],
        },
      },
      {
        // One at a time, after the files that run two at a time: the floods' load never meets
        // another file's deadline, and the example apps' deadlines meet no other file's load.
        extends: true,
        test: {
          name: 'load',
          include: LOAD,
          sequence: { groupOrder: 1 },
          fileParallelism: false,
          globalSetup: ['test/support/redis-pool.setup.ts'],
        },
      },
      {
        // The chaos tests measure latencies in ms: they run after the rest, so the suite's own load
        // does not count against the store's deadline.
        extends: true,
        test: { name: 'fault', include: FAULT, sequence: { groupOrder: 2 }, fileParallelism: false },
      },
    ],
  },
});
