/**
 * The conformance vectors on a real memcached, started by the test on a free port: every
 * algorithm the Memcached store supports (all but sliding-log, docs/memcached.md) answers every
 * step as the memory store does; once more through the over-limit cache, and once with real time
 * passing between steps, which must not change any answer (keys live in real time). The penalty
 * vectors (but sliding-log's) and every reserve-then-settle vector but sliding-log's too (G-MEMC-7, G-MEMC-8).
 */
import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createLimiter, memcachedStore, type MemcachedStore } from '../../../src/index.js';
import { useMemcached } from '../../support/memcached.js';
import { describeGroupVectors } from '../../support/group-vectors.js';
import { describeReservationVectors } from '../../support/reservation-vectors.js';
import { BLOCK_VECTOR_DIR, describeVectors, loadVectors } from '../../support/vectors.js';

const memcached = useMemcached();

async function open(): Promise<MemcachedStore> {
  const store = memcachedStore({ servers: memcached().address });
  await store.ready();
  return store;
}

const SUPPORTED = (file: string): boolean => !file.startsWith('sliding-log');

describeVectors('memcached', open, 0, {}, undefined, SUPPORTED);
describeVectors('memcached, over-limit cache', open, 0, { overLimitCache: true }, undefined, SUPPORTED);
describeVectors('memcached, replayed slowly', open, 20, {}, undefined, SUPPORTED);
// Penalties (blockDuration): the block's end in the state's item, written in the same compare-and-set as the denial.
const PLAYED_BLOCK = (algorithm: string): boolean => algorithm !== 'sliding-log';
describeVectors('memcached, blocks', open, 0, {}, BLOCK_VECTOR_DIR, undefined, (c) => PLAYED_BLOCK(c.policy.algorithm));
describeVectors('memcached, blocks, over-limit cache', open, 0, { overLimitCache: true }, BLOCK_VECTOR_DIR, undefined, (c) => PLAYED_BLOCK(c.policy.algorithm));
// Reserve then settle: the state and the key's reservation records in one item, each call one compare-and-set.
describeReservationVectors('memcached', open, SUPPORTED);
// Groups of limits on distinct states, penalties among them (a state named twice is refused).
describeGroupVectors('memcached', open, ['fixed-window', 'gcra', 'leaky-bucket', 'sliding-window', 'token-bucket'], false, true);

describe('memcached conformance', () => {
  it('plays every algorithm but sliding-log, which the store refuses', async () => {
    const played = loadVectors().filter(({ file }) => SUPPORTED(file)).map(({ vectors }) => vectors.algorithm);
    expect([...new Set(played)].sort()).toEqual(['fixed-window', 'gcra', 'leaky-bucket', 'sliding-window', 'token-bucket']);
    const limiter = createLimiter({ store: await open() });
    try {
      await expect(limiter.limit('k', { algorithm: 'sliding-log', limit: 5, window: '1m' })).rejects.toThrow(/does not support the sliding-log algorithm.*sliding-window with precision/);
    } finally {
      await limiter.close();
    }
  });

  it("plays every penalty and reservation vector but sliding-log's", () => {
    const blocks = loadVectors(BLOCK_VECTOR_DIR).flatMap(({ vectors }) => vectors.cases.map((c) => c.policy.algorithm));
    expect([...new Set(blocks.filter(PLAYED_BLOCK))].sort()).toEqual(['fixed-window', 'gcra', 'leaky-bucket', 'sliding-window', 'token-bucket']);
    expect(blocks.filter((algorithm) => !PLAYED_BLOCK(algorithm))).toEqual(['sliding-log', 'sliding-log']);
    const reservations = readdirSync(new URL('../../vectors/reservations/', import.meta.url)).filter((name) => name.endsWith('.json') && SUPPORTED(name));
    expect(reservations.length).toBeGreaterThanOrEqual(7);
  });
});
