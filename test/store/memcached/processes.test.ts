/**
 * Slots and penalties on one memcached across real processes (test/support/slot-worker.mjs and
 * block-worker.mjs, through the built package): 4 processes × 8 loops contending for a few slots
 * of one key never hold more than the limit at once, as a counter they keep in Redis around each
 * hold measures (the same harness as the Redis stores'); the slots of a holder killed with SIGKILL
 * are free again once their ttl has passed, with nobody releasing them; a block one process starts
 * is honoured by another.
 */
import { execFile, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { createLimiter, memcachedStore, type Decision, type Policy } from '../../../src/index.js';
import { useMemcached } from '../../support/memcached.js';
import { useRedisTopologies } from '../../support/redis-topologies.js';
import { expectSlotsNeverOverLimit } from '../../support/slot-hammer.js';

const run = promisify(execFile);
const SLOT_WORKER = new URL('../../support/slot-worker.mjs', import.meta.url).pathname;
const BLOCK_WORKER = new URL('../../support/block-worker.mjs', import.meta.url).pathname;
const PROCESSES = 4;
const LIMIT = 5;
const HAMMER_MS = 1_500;

const memcached = useMemcached();
const redis = useRedisTopologies();

async function openLimiter(): Promise<ReturnType<typeof createLimiter>> {
  const store = memcachedStore({ servers: memcached().address });
  await store.ready();
  // What is measured is the store's answers: a generous deadline, and its error rather than a failure mode's answer.
  return createLimiter({ store, deadlineMs: 10_000, failureMode: 'throw' });
}

describe('memcached across processes', () => {
  it(`concurrency slots: ${PROCESSES} processes never hold more than the limit at once`, async () => {
    const key = `mc-hammer-${Date.now()}`;
    await expectSlotsNeverOverLimit({ storeJson: JSON.stringify({ memcached: memcached().address }), counterUrl: redis.single.url, key, limit: LIMIT, ms: HAMMER_MS, processes: PROCESSES });
  }, 30_000);

  it('concurrency slots: a holder killed with SIGKILL frees its slots at their ttl, with nobody releasing them', async () => {
    const key = `mc-kill-${Date.now()}`;
    const holder = spawn(process.execPath, [SLOT_WORKER, 'hold', JSON.stringify({ memcached: memcached().address }), key, String(LIMIT), '30s'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [line] = await createInterface({ input: holder.stdout })[Symbol.asyncIterator]().next().then((next) => [next.value as string]);
    holder.kill('SIGKILL');
    const permits = JSON.parse(line!) as { allowed: boolean; expiresAt: number }[];
    expect(permits.every((permit) => permit.allowed)).toBe(true);
    const expiries = permits.map((permit) => permit.expiresAt);
    const limiter = await openLimiter();
    try {
      // On the calls' timeline rather than waiting 30 s: held until the first expiry, all free after the last.
      const before = await limiter.acquire(key, { limit: LIMIT, ttl: '1s', now: Math.min(...expiries) - 1 });
      expect([before.allowed, before.held, before.retryAfter]).toEqual([false, LIMIT, 1]);
      const after = [];
      for (let i = 0; i < LIMIT; i++) after.push(await limiter.acquire(key, { limit: LIMIT, ttl: '1s', now: Math.max(...expiries) }));
      expect(after.map((permit) => [permit.allowed, permit.held])).toEqual(Array.from({ length: LIMIT }, (_, i) => [true, i + 1]));
    } finally {
      await limiter.close();
    }
  }, 30_000);

  it('a penalty: a block set by one process is honoured by another, to the ms of its end', async () => {
    const policy: Policy = { algorithm: 'token-bucket', limit: 1, window: '1s', blockDuration: '10s' };
    const t0 = 1_700_000_000_000;
    const key = `mc-block-${Date.now()}`;
    const inWorker = async (now: number): Promise<Decision> => JSON.parse((await run(process.execPath, [BLOCK_WORKER, `memcached:${memcached().address}`, JSON.stringify(policy), key, String(now)])).stdout) as Decision;
    expect((await inWorker(t0)).allowed).toBe(true);
    expect(await inWorker(t0 + 1)).toMatchObject({ allowed: false, reason: 'blocked', retryAfter: 10_000 });
    const limiter = await openLimiter();
    try {
      expect(await limiter.limit(key, policy, { now: t0 + 3_000 })).toMatchObject({ allowed: false, reason: 'blocked', retryAfter: 7_001 });
      expect(await limiter.limit(key, policy, { now: t0 + 10_000 })).toMatchObject({ allowed: false, reason: 'blocked', retryAfter: 1 });
      expect((await limiter.limit(key, policy, { now: t0 + 10_001 })).allowed).toBe(true);
    } finally {
      await limiter.close();
    }
  }, 20_000);
});
