/**
 * Concurrency slots, reserve then settle and penalties on a real memcached (issue 29), through the
 * public limiter API: the slot behaviours every store shows (test/support/slot-behaviours.ts), the
 * bounds of one item (slots and open reservations per key) refused with typed errors, and what
 * rides beside the state (a reset keeps the reservation records, as on Redis). The vectors are
 * in vectors.test.ts, several processes in processes.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, InvalidOptionError, memcachedStore, type MemcachedStore, type Policy } from '../../../src/index.js';
import { useMemcached } from '../../support/memcached.js';
import { describeSlotBehaviours } from '../../support/slot-behaviours.js';

const memcached = useMemcached();
const NOW = 1_800_000_000_000;
const unique = (name: string): string => `${name}-${Math.random().toString(36).slice(2)}`;

async function open(): Promise<MemcachedStore> {
  const store = memcachedStore({ servers: memcached().address });
  await store.ready();
  return store;
}

// Memcached cannot list its keys: the prefix reset is refused (store.test.ts), its slot case left out.
describeSlotBehaviours('memcached store', open, false);

describe('memcached: the bounds of one item', () => {
  it('an acquire with a limit past 5,000 slots per key is refused with an InvalidOptionError naming the alternative', async () => {
    const limiter = createLimiter({ store: await open(), deadlineMs: 5_000 });
    try {
      await expect(limiter.acquire(unique('slots'), { limit: 5_001, ttl: '1m' })).rejects.toThrow(InvalidOptionError);
      await expect(limiter.acquire(unique('slots'), { limit: 5_001, ttl: '1m' })).rejects.toThrow(/5000 slots per key.*memory or Redis store/);
      expect((await limiter.acquire(unique('slots'), { limit: 5_000, ttl: '1m' })).allowed).toBe(true);
    } finally {
      await limiter.close();
    }
  });

  it('1,000 open reservations per key: the next is refused with an InvalidOptionError; a settled one makes room', async () => {
    const limiter = createLimiter({ store: await open(), deadlineMs: 10_000 });
    const key = unique('records');
    const policy: Policy = { algorithm: 'token-bucket', limit: 5_000, window: '1h' };
    try {
      // Concurrent: one lane, a few compare-and-set rounds.
      const reserved = await Promise.all(Array.from({ length: 1_000 }, (_, i) => limiter.reserve(key, policy, { id: `r${i}`, cost: 1, now: NOW })));
      expect(reserved.every((decision) => decision.allowed)).toBe(true);
      await expect(limiter.reserve(key, policy, { id: 'one-more', cost: 1, now: NOW })).rejects.toThrow(/already holds 1000 open reservations.*memory or Redis store/);
      expect((await limiter.settle(key, policy, { id: 'r7', cost: 0, now: NOW })).status).toBe('settled');
      expect(await limiter.reserve(key, policy, { id: 'one-more', cost: 1, now: NOW })).toMatchObject({ allowed: true, remaining: 5_000 - 1_000 });
      // The settled record was dropped to make room: its settle is now unknown (it stands settled in the state).
      expect((await limiter.settle(key, policy, { id: 'r7', cost: 0, now: NOW })).status).toBe('unknown');
    } finally {
      await limiter.close();
    }
  });
});

describe('memcached: what rides beside the state', () => {
  it("a reset forgets the state and its block but keeps the key's reservation records (as on Redis)", async () => {
    const limiter = createLimiter({ store: await open(), deadlineMs: 5_000 });
    const key = unique('reset');
    const policy: Policy = { algorithm: 'fixed-window', limit: 3, window: '1m', blockDuration: '1m' };
    try {
      const first = await limiter.reserve(key, policy, { id: 'a', cost: 3, now: NOW });
      expect((await limiter.limit(key, policy, { now: NOW + 1 })).reason).toBe('blocked');
      await limiter.reset(key, policy);
      expect(await limiter.limit(key, policy, { now: NOW + 2 })).toMatchObject({ allowed: true, remaining: 2 });
      // The retry of reservation a answers its booked decision, counting nothing again.
      expect(await limiter.reserve(key, policy, { id: 'a', cost: 3, now: NOW + 3 })).toEqual(first);
      // Its refund gives back what the window still holds (the one call since the reset), no more.
      expect((await limiter.settle(key, policy, { id: 'a', cost: 1, now: NOW + 4 })).decision.remaining).toBe(3);
    } finally {
      await limiter.close();
    }
  });

  it.each([['1m', 60_000], ['1 s, its packed window number far from the clock', 1_000]] as const)('an aligned fixed window counted by incr takes reservations: both count in one window, whichever came first (window %s)', async (_name, window) => {
    const limiter = createLimiter({ store: await open(), deadlineMs: 5_000 });
    const key = unique('packed');
    const policy: Policy = { algorithm: 'fixed-window', limit: 10, window };
    // NOW is a year past the clock: more than 2^20 one-second windows, the packing's reach around the clock.
    try {
      expect((await limiter.limit(key, policy, { now: NOW, cost: 2 })).remaining).toBe(8);
      expect((await limiter.reserve(key, policy, { id: 'a', cost: 5, now: NOW + 1 })).remaining).toBe(3);
      expect((await limiter.limit(key, policy, { now: NOW + 2, cost: 3 })).remaining).toBe(0);
      expect((await limiter.settle(key, policy, { id: 'a', cost: 1, now: NOW + 3 })).decision.remaining).toBe(4);
      expect(await limiter.peek(key, policy, { now: NOW + 4, cost: 4 })).toMatchObject({ allowed: true, remaining: 0 });
      expect((await limiter.limit(key, policy, { now: NOW + 5, cost: 5 })).allowed).toBe(false);
    } finally {
      await limiter.close();
    }
  });
});
