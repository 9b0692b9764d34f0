/**
 * Fair shares are exact across processes: 4 OS processes × 64 concurrent calls each hammer the 4
 * tenants of one group (weights 1, 2, 3, 4) with 6,000 attempts in all on a shared limit of 500
 * (a day's window: nothing resets during the test). The group admits exactly 500, on a single
 * Redis and on a 3-master Cluster: every decision reads and writes the group's hash in one script.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { Policy } from '../../../src/index.js';
import { useRedisTopologies } from '../../support/redis-topologies.js';

const runWorker = promisify(execFile);
const WORKER = new URL('../../support/hammer-worker.mjs', import.meta.url).pathname;
const PROCESSES = 4;
const CONCURRENCY = 64;
const ATTEMPTS_PER_TENANT = 1_500;
const LIMIT = 500;
// A store error fails the call (counted, its message shown) instead of a failure-mode answer that would admit.
const THROW = JSON.stringify({ failureMode: 'throw' });

const redis = useRedisTopologies();

describe.each([
  // One group's hash is one slot: all 1,024 calls in flight queue on one server; on a loaded
  // machine that is more than the 1 s default command timeout.
  ['single Redis', () => ({ url: redis.single.url, commandTimeoutMs: 20_000 })],
  ['Redis Cluster', () => ({ cluster: redis.cluster.nodes, commandTimeoutMs: 20_000 })],
])(`fair shares across ${PROCESSES} processes on %s`, (_topology, storeOptions) => {
  it('concurrent calls of 4 tenants from 4 processes never admit more than the group limit: exactly 500 of 6,000', async () => {
    const group = `hammer-${Date.now()}-${Math.random().toString(36).slice(2)}`;
    const jobs = [1, 2, 3, 4].map((weight) => ({ key: `tenant-${weight}`, policy: { algorithm: 'fixed-window', limit: LIMIT, window: '1d', share: { group, weight } } satisfies Policy }));
    const outputs = await Promise.all(
      Array.from({ length: PROCESSES }, () => runWorker(process.execPath, [WORKER, JSON.stringify(storeOptions()), JSON.stringify(jobs), String(ATTEMPTS_PER_TENANT / PROCESSES), String(CONCURRENCY), THROW])),
    );
    const tallies = outputs.map(({ stdout }) => JSON.parse(stdout) as { admitted: number; failed: number; firstError?: string }[]);
    const admitted = jobs.map((_, job) => tallies.reduce((sum, part) => sum + part[job]!.admitted, 0));
    expect(tallies.flat().reduce((sum, part) => sum + part.failed, 0), tallies.flat().find((part) => part.firstError)?.firstError).toBe(0);
    expect(admitted.reduce((sum, count) => sum + count, 0)).toBe(LIMIT);
  }, 120_000);
});
