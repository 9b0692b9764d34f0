/**
 * The concurrency-slot behaviours every store that holds slots must show, through the library's
 * public interface (`acquire`, `release`, `heldSlots`) on explicit times: at most `limit` held,
 * refusals that say when a slot frees, releases that are idempotent, expiry after `ttl`, a retried
 * id counted once. Played on the memory store, Redis, a Redis Cluster (test/limiter/concurrency.test.ts)
 * and memcached (test/store/memcached/features.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, type Limiter, type Store } from '../../src/index.js';

const T0 = Date.now();
const unique = (name: string): string => `${name}-${Math.random().toString(36).slice(2)}`;

/** Registers the slot behaviours on the store `open` gives; `resetsPrefix` false leaves out the prefix reset (memcached cannot list keys). */
export function describeSlotBehaviours(name: string, open: () => Promise<Store>, resetsPrefix = true): void {
  const limiter = async (): Promise<Limiter> => createLimiter({ store: await open(), deadlineMs: 5_000 });

  describe(`concurrency slots on the ${name}`, () => {

    it('grants up to the limit, then refuses until the earliest slot expires', async () => {
      const slots = await limiter();
      const key = unique('conc');
      const granted = [];
      for (let i = 0; i < 3; i++) granted.push(await slots.acquire(key, { limit: 3, ttl: '10s', now: T0 + i * 1_000 }));
      expect(granted.map((p) => [p.allowed, p.held, p.expiresAt])).toEqual([
        [true, 1, T0 + 10_000],
        [true, 2, T0 + 11_000],
        [true, 3, T0 + 12_000],
      ]);
      const refused = await slots.acquire(key, { limit: 3, ttl: '10s', now: T0 + 4_000 });
      expect(refused).toMatchObject({ allowed: false, limit: 3, held: 3, retryAfter: 6_000, expiresAt: 0, now: T0 + 4_000 });
      expect(await refused.release()).toBe(false);
      // The first slot has expired at its ttl: its holder never released it, and it no longer counts.
      const after = await slots.acquire(key, { limit: 3, ttl: '10s', now: T0 + 10_000 });
      expect([after.allowed, after.held]).toEqual([true, 3]);
      expect(new Set([...granted, after].map((p) => p.id)).size).toBe(4);
    });

    it('release frees a slot from any limiter; a second release, or one of an expired slot, is a no-op answering false', async () => {
      const store = await open();
      const [slots, other] = [createLimiter({ store, deadlineMs: 5_000 }), createLimiter({ store, deadlineMs: 5_000 })];
      const key = unique('conc');
      const first = await slots.acquire(key, { limit: 1, ttl: 1_000, now: T0 });
      expect((await slots.acquire(key, { limit: 1, ttl: 1_000, now: T0 + 1 })).allowed).toBe(false);
      expect(await other.release(key, first.id, { now: T0 + 2 })).toBe(true);
      expect(await first.release({ now: T0 + 3 })).toBe(false);
      const second = await slots.acquire(key, { limit: 1, ttl: 1_000, now: T0 + 4 });
      expect([second.allowed, second.held]).toEqual([true, 1]);
      expect(await slots.release(key, second.id, { now: T0 + 1_004 })).toBe(false);
      expect(await slots.release(key, 'never-granted', { now: T0 + 1_005 })).toBe(false);
      expect((await slots.acquire(key, { limit: 1, ttl: 1_000, now: T0 + 1_006 })).held).toBe(1);
    });

    it('an acquire retried with the same id renews its slot and counts once', async () => {
      const slots = await limiter();
      const key = unique('conc');
      const first = await slots.acquire(key, { limit: 2, ttl: '1s', id: 'job-7', now: T0 });
      const again = await slots.acquire(key, { limit: 2, ttl: '1s', id: 'job-7', now: T0 + 500 });
      expect([first.held, again.allowed, again.held, again.expiresAt]).toEqual([1, true, 1, T0 + 1_500]);
      // Renewed: still held past the first ttl.
      expect((await slots.acquire(key, { limit: 2, ttl: '1s', now: T0 + 1_200 })).held).toBe(2);
      expect(await slots.release(key, 'job-7', { now: T0 + 1_300 })).toBe(true);
    });

    // A store that cannot list its keys (memcached) refuses a prefix reset, naming the per-key reset.
    if (!resetsPrefix) {
      it('resetPrefix is refused, naming reset per key; the slots stay held', async () => {
        const slots = await limiter();
        const key = unique('tenant');
        expect((await slots.acquire(key, { limit: 1, ttl: '1m', now: T0 })).allowed).toBe(true);
        await expect(slots.resetPrefix(key)).rejects.toThrow(/limiter\.reset/);
        expect((await slots.acquire(key, { limit: 1, ttl: '1m', now: T0 })).allowed).toBe(false);
      });
    } else {
      it('resetPrefix forgets the slots of the keys it names, and only those', async () => {
        const slots = await limiter();
        const prefix = unique('tenant');
        for (const key of [`${prefix}:a`, `${prefix}:b`, `other-${prefix}`]) expect((await slots.acquire(key, { limit: 1, ttl: '1m', now: T0 })).allowed).toBe(true);
        expect(await slots.resetPrefix(`${prefix}:`)).toBe(2);
        expect((await slots.acquire(`${prefix}:a`, { limit: 1, ttl: '1m', now: T0 })).allowed).toBe(true);
        expect((await slots.acquire(`other-${prefix}`, { limit: 1, ttl: '1m', now: T0 })).allowed).toBe(false);
      });
    }

    it('keys are apart: one key full does not refuse another', async () => {
      const slots = await limiter();
      const [a, b] = [unique('a{x}'), unique('b%')];
      expect((await slots.acquire(a, { limit: 1, ttl: '1m', now: T0 })).allowed).toBe(true);
      expect((await slots.acquire(a, { limit: 1, ttl: '1m', now: T0 })).allowed).toBe(false);
      expect((await slots.acquire(b, { limit: 1, ttl: '1m', now: T0 })).allowed).toBe(true);
    });

    it("heldSlots counts every limiter's slots of each key at its instant: released and expired ones not, and takes none", async () => {
      const store = await open();
      const [slots, other] = [createLimiter({ store, deadlineMs: 5_000 }), createLimiter({ store, deadlineMs: 5_000 })];
      const [a, b, none] = [unique('held-a'), unique('held-b{tag}'), unique('held-none')];
      const first = await slots.acquire(a, { limit: 5, ttl: '10s', now: T0 });
      await other.acquire(a, { limit: 5, ttl: '20s', now: T0 + 1_000 });
      await other.acquire(a, { limit: 5, ttl: '20s', now: T0 + 1_000 });
      await other.acquire(b, { limit: 5, ttl: '1s', now: T0 });
      expect(await slots.heldSlots([a, b, none], { now: T0 + 500 })).toEqual([3, 1, 0]);
      expect(await slots.release(a, first.id, { now: T0 + 2_000 })).toBe(true);
      // b's slot expired at T0 + 1 s, with nobody calling on b.
      expect(await slots.heldSlots([a, b, none], { now: T0 + 2_000 })).toEqual([2, 0, 0]);
      // A look takes nothing: with a limit of 2, the two held slots still refuse a third.
      expect((await slots.acquire(a, { limit: 2, ttl: '1s', now: T0 + 2_001 })).allowed).toBe(false);
      expect(await slots.heldSlots([a], { now: T0 + 21_000 })).toEqual([0]);
      expect(await slots.heldSlots([], { now: T0 })).toEqual([]);
    });
  });
}
