/**
 * Exactness across processes: 4 OS processes × 64 concurrent calls make 5,000 attempts on one key
 * with a limit of 1,000 (a window long enough that nothing refills during the test). Exactly
 * 1,000 must be admitted, for every algorithm, on a single Redis and on a 3-master Cluster.
 *
 * The six algorithms are hammered at once, each on its own key with its own 64 callers per process,
 * by the same 4 processes (starting a process costs more than its thousand decisions).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../../src/algorithms/catalog.js';
import { useRedisTopologies } from '../../support/redis-topologies.js';

const run = promisify(execFile);
const WORKER = new URL('../../support/hammer-worker.mjs', import.meta.url).pathname;
const PROCESSES = 4;
const CONCURRENCY = 64;
const ATTEMPTS = 5_000;
const LIMIT = 1_000;

const redis = useRedisTopologies();

interface Tally {
  readonly admitted: number;
  readonly failed: number;
}

/** Every algorithm's key hammered at once by {@link PROCESSES} processes: each algorithm's tally over them. */
async function hammer(storeOptions: object): Promise<Map<string, Tally>> {
  const stamp = Date.now();
  const jobs = ALGORITHMS.map((algorithm) => ({ policy: { algorithm, limit: LIMIT, window: '1d' }, key: `hammer:${algorithm}:${stamp}` }));
  const outputs = await Promise.all(
    Array.from({ length: PROCESSES }, () =>
      run(process.execPath, [WORKER, JSON.stringify(storeOptions), JSON.stringify(jobs), String(ATTEMPTS / PROCESSES), String(CONCURRENCY)]),
    ),
  );
  const parts = outputs.map(({ stdout }) => JSON.parse(stdout) as Tally[]);
  return new Map(
    ALGORITHMS.map((algorithm, job) => [
      algorithm,
      parts.map((part) => part[job]!).reduce((total, part) => ({ admitted: total.admitted + part.admitted, failed: total.failed + part.failed })),
    ]),
  );
}

describe.each([
  ['single Redis', () => ({ url: redis.single.url })],
  ['Redis Cluster', () => ({ cluster: redis.cluster.nodes })],
])('exactness across %d processes on %s', (_topology, storeOptions) => {
  let tallies: Map<string, Tally>;
  beforeAll(async () => {
    tallies = await hammer(storeOptions());
  }, 120_000);

  it.each(ALGORITHMS)('%s admits exactly the limit', (algorithm) => {
    expect(tallies.get(algorithm)).toEqual({ admitted: LIMIT, failed: 0 });
  });
});
