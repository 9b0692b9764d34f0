/**
 * Exactness across processes on one memcached: 4 OS processes × 64 concurrent calls make 5,000
 * attempts on one key with a limit of 1,000 (a day's window: nothing refills during the test).
 * Every algorithm the store supports admits exactly 1,000: the fixed window by `incr` (atomic),
 * the others by compare-and-set rounds (each write conditional on the state it was decided on).
 * And with the retries cut to 2 attempts, a round that loses them all fails as a store error that
 * the failure mode answers (`closed` here): never over the limit.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { useMemcached } from '../../support/memcached.js';

const runWorker = promisify(execFile);
const WORKER = new URL('../../support/hammer-worker.mjs', import.meta.url).pathname;
const PROCESSES = 4;
const CONCURRENCY = 64;
const ATTEMPTS = 5_000;
const LIMIT = 1_000;
const ALGORITHMS = ['fixed-window', 'token-bucket', 'leaky-bucket', 'gcra', 'sliding-window'] as const;

interface Tally {
  readonly admitted: number;
  readonly failed: number;
}

const memcached = useMemcached();

/** Every algorithm's key hammered at once by {@link PROCESSES} processes: each algorithm's tally over them. */
async function hammer(storeOptions: object, limiterOptions: object = {}): Promise<Map<string, Tally>> {
  const stamp = `${Date.now()}-${Math.random().toString(36).slice(2)}`;
  const jobs = ALGORITHMS.map((algorithm) => ({ policy: { algorithm, limit: LIMIT, window: '1d' }, key: `hammer:${algorithm}:${stamp}` }));
  const outputs = await Promise.all(
    Array.from({ length: PROCESSES }, () => runWorker(process.execPath, [WORKER, JSON.stringify(storeOptions), JSON.stringify(jobs), String(ATTEMPTS / PROCESSES), String(CONCURRENCY), JSON.stringify(limiterOptions)])),
  );
  const parts = outputs.map(({ stdout }) => JSON.parse(stdout) as Tally[]);
  return new Map(ALGORITHMS.map((algorithm, job) => [algorithm, parts.map((part) => part[job]!).reduce((total, part) => ({ admitted: total.admitted + part.admitted, failed: total.failed + part.failed }))]));
}

describe('exactness across 4 processes on memcached', () => {
  let tallies: Map<string, Tally>;
  beforeAll(async () => {
    tallies = await hammer({ servers: memcached().address });
  }, 120_000);

  it.each(ALGORITHMS)('%s admits exactly the limit (4 processes × 64 in flight on one key)', (algorithm) => {
    expect(tallies.get(algorithm), memcached().logTail()).toEqual({ admitted: LIMIT, failed: 0 });
  });
});

describe('compare-and-set retries exhausted on memcached', () => {
  it('with casAttempts 2, rounds that lose every attempt are answered by the failure mode (closed): never over the limit', async () => {
    const tallies = await hammer({ servers: memcached().address, casAttempts: 2 }, { failureMode: 'closed' });
    const report = ALGORITHMS.map((algorithm) => `${algorithm}: ${tallies.get(algorithm)!.admitted}`).join(', ');
    console.log(`admitted of ${LIMIT} with casAttempts 2 (4 processes × 64 in flight): ${report}`);
    for (const algorithm of ALGORITHMS) expect(tallies.get(algorithm)!.admitted, report).toBeLessThanOrEqual(LIMIT);
  }, 120_000);
});
