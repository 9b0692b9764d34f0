/**
 * Exactness across processes: 4 OS processes × 64 concurrent calls make 5,000 attempts on one key
 * with a limit of 1,000 (a window long enough that nothing refills during the test). Exactly
 * 1,000 must be admitted, for every algorithm, on a single Redis and on a 3-master Cluster.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../../src/algorithms/catalog.js';
import { useRedisTopologies } from '../../support/redis-topologies.js';

const run = promisify(execFile);
const WORKER = new URL('../../support/hammer-worker.mjs', import.meta.url).pathname;
const PROCESSES = 4;
const CONCURRENCY = 64;
const ATTEMPTS = 5_000;
const LIMIT = 1_000;
const ROUNDS = 1;

const redis = useRedisTopologies();

async function hammer(storeOptions: object, algorithm: string, key: string): Promise<{ admitted: number; failed: number }> {
  const policy = { algorithm, limit: LIMIT, window: '1d' };
  const outputs = await Promise.all(
    Array.from({ length: PROCESSES }, () =>
      run(process.execPath, [WORKER, JSON.stringify(storeOptions), JSON.stringify(policy), key, String(ATTEMPTS / PROCESSES), String(CONCURRENCY)]),
    ),
  );
  return outputs
    .map(({ stdout }) => JSON.parse(stdout) as { admitted: number; failed: number })
    .reduce((total, part) => ({ admitted: total.admitted + part.admitted, failed: total.failed + part.failed }));
}

describe.each([
  ['single Redis', () => ({ url: redis.single.url })],
  ['Redis Cluster', () => ({ cluster: redis.cluster.nodes })],
])('exactness across %d processes on %s', (_topology, storeOptions) => {
  it.each(ALGORITHMS)('%s admits exactly the limit', async (algorithm) => {
    for (let round = 0; round < ROUNDS; round++) {
      const result = await hammer(storeOptions(), algorithm, `hammer:${algorithm}:${round}:${Date.now()}`);
      expect(result, `round ${round}`).toEqual({ admitted: LIMIT, failed: 0 });
    }
  }, 60_000);
});
