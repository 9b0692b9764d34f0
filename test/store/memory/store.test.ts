/**
 * The memory store's bounds: at most maxKeys states, least recently used evicted first, expired
 * state reclaimed without a timer per key, denials and peeks taking no memory.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLimiter, memoryStore, type Policy } from '../../../src/index.js';

const NOW = 1_700_000_000_000;
const PER_MINUTE: Policy = { algorithm: 'token-bucket', limit: 10, window: '1m' };

function setup(maxKeys: number) {
  const store = memoryStore({ maxKeys, sweepIntervalMs: 0 });
  return { store, limiter: createLimiter({ store }) };
}

describe('memory store', () => {
  it('holds at most maxKeys keys and evicts the least recently used first', async () => {
    const { store, limiter } = setup(3);
    for (const key of ['a', 'b', 'c']) await limiter.limit(key, PER_MINUTE, { now: NOW });
    await limiter.limit('a', PER_MINUTE, { now: NOW }); // a is now the most recent; b the least
    await limiter.limit('d', PER_MINUTE, { now: NOW });
    expect(store.stats()).toEqual({ keys: 3, maxKeys: 3, spaces: 1, evictions: 1, expired: 0 });
    // b was evicted: it starts full again; a kept its two requests.
    expect((await limiter.peek('b', PER_MINUTE, { now: NOW })).remaining).toBe(9);
    expect((await limiter.peek('a', PER_MINUTE, { now: NOW })).remaining).toBe(7);
    expect((await limiter.peek('c', PER_MINUTE, { now: NOW })).remaining).toBe(8);
  });

  it('stays bounded under a flood of distinct keys (an attacker rotating addresses)', async () => {
    const { store, limiter } = setup(1000);
    for (let i = 0; i < 20_000; i++) await limiter.limit(`ip:2001:db8::${i.toString(16)}`, PER_MINUTE, { now: NOW });
    expect(store.stats().keys).toBe(1000);
    expect(store.stats().evictions).toBe(19_000);
  });

  describe('expiry, judged by the process clock (here a controlled one)', () => {
    beforeEach(() => {
      vi.useFakeTimers({ toFake: ['Date'] });
      vi.setSystemTime(NOW);
    });
    afterEach(() => {
      vi.useRealTimers();
    });

    it('reclaims expired keys with prune, and incrementally as new keys arrive', async () => {
      const { store, limiter } = setup(100);
      const shortWindow: Policy = { algorithm: 'fixed-window', limit: 5, window: 1000 };
      for (let i = 0; i < 50; i++) await limiter.limit(`old:${i}`, shortWindow);
      expect(store.stats().keys).toBe(50);
      // One window later all 50 are expired; new keys sweep a couple of old slots each.
      vi.setSystemTime(NOW + 1000);
      for (let i = 0; i < 30; i++) await limiter.limit(`new:${i}`, shortWindow);
      const afterIncremental = store.stats();
      expect(afterIncremental.expired).toBeGreaterThan(0);
      expect(afterIncremental.evictions).toBe(0);
      expect(store.prune(NOW + 1000)).toBe(50 - afterIncremental.expired);
      expect(store.stats().keys).toBe(30);
      expect(store.prune(NOW + 2000)).toBe(30);
      expect(store.stats()).toMatchObject({ keys: 0, expired: 80, evictions: 0 });
    });

    it('reclaims a short-lived key among long-lived ones as new keys arrive, once it has expired and not before', async () => {
      // The incremental sweep reads no slot before the earliest expiry it knows of: that bound must
      // follow a key that expires sooner than those stored before it.
      const { store, limiter } = setup(2000);
      const hourly: Policy = { algorithm: 'fixed-window', limit: 5, window: '1h' };
      for (let i = 0; i < 200; i++) await limiter.limit(`long:${i}`, hourly);
      await limiter.limit('short', { algorithm: 'fixed-window', limit: 5, window: 1000 });
      for (let i = 0; i < 200; i++) await limiter.limit(`later:${i}`, hourly);
      vi.setSystemTime(NOW + 999);
      for (let i = 0; i < 300; i++) await limiter.limit(`before:${i}`, hourly);
      expect(store.stats().expired).toBe(0);
      vi.setSystemTime(NOW + 1000);
      for (let i = 0; i < 400; i++) await limiter.limit(`after:${i}`, hourly);
      expect(store.stats()).toMatchObject({ keys: 1100, expired: 1, evictions: 0 });
    });

    it('does not reclaim keys that are still counting', async () => {
      const { store, limiter } = setup(10);
      await limiter.limit('k', PER_MINUTE);
      expect(store.prune(NOW + 5_999)).toBe(0);
      expect(store.prune(NOW + 6_000)).toBe(1);
    });

    it("keeps a key decided at an explicit now as Redis does: its lifetime, plus how far now lags the clock (at most an hour), plus a second", async () => {
      const { store, limiter } = setup(10);
      await limiter.limit('behind', PER_MINUTE, { now: NOW - 10_000 }); // a lifetime of 6 s, 10 s behind
      await limiter.limit('far-behind', PER_MINUTE, { now: NOW - 86_400_000 });
      await limiter.limit('ahead', PER_MINUTE, { now: NOW + 86_400_000 });
      expect(store.prune(NOW + 5_999 + 1_000)).toBe(0);
      expect(store.prune(NOW + 6_000 + 1_000)).toBe(1); // ahead: 6 s of real time, and the second
      expect(store.prune(NOW + 6_000 + 10_000 + 999)).toBe(0);
      expect(store.prune(NOW + 6_000 + 10_000 + 1_000)).toBe(1); // behind
      expect(store.prune(NOW + 6_000 + 3_600_000 + 1_000)).toBe(1); // far behind: the lag counts up to an hour
    });

    it('a key spent at T is still spent at T + 1 after another key is decided at T + 20 s (no key expires by another key\'s time)', async () => {
      const { store, limiter } = setup(10);
      const policy: Policy = { algorithm: 'fixed-window', limit: 3, window: '10s' };
      for (let i = 0; i < 3; i++) await limiter.limit('a', policy, { now: NOW });
      await limiter.limit('b', policy, { now: NOW + 20_000 }); // a new key: examines slots for expiry
      store.prune(); // the periodic sweep, at the clock's time
      expect((await limiter.limit('a', policy, { now: NOW + 1 })).allowed).toBe(false);
      expect(store.stats().keys).toBe(2);
    });
  });

  it('denials, peeks and limit-0 decisions of new keys take no memory', async () => {
    const { store, limiter } = setup(10);
    await limiter.peek('peeked', PER_MINUTE, { now: NOW });
    await limiter.limit('too-costly', PER_MINUTE, { now: NOW, cost: 11 });
    await limiter.limit('zero', { ...PER_MINUTE, limit: 0 }, { now: NOW });
    await limiter.limit('log', { algorithm: 'sliding-log', limit: 2, window: 1000, countRejected: true }, { now: NOW, cost: 3 });
    expect(store.stats().keys).toBe(0);
  });

  it('reset frees the key', async () => {
    const { store, limiter } = setup(10);
    await limiter.limit('k', PER_MINUTE, { now: NOW });
    await limiter.reset('k', PER_MINUTE);
    await limiter.reset('never-seen', PER_MINUTE);
    expect(store.stats().keys).toBe(0);
  });

  it('reuses freed slots and keeps keys of different policies apart', async () => {
    const { store, limiter } = setup(4);
    const log: Policy = { algorithm: 'sliding-log', limit: 3, window: 1000 };
    await limiter.limit('k', PER_MINUTE, { now: NOW });
    await limiter.limit('k', log, { now: NOW });
    await limiter.limit('k', log, { now: NOW + 1 });
    expect(store.stats().keys).toBe(2);
    await limiter.reset('k', PER_MINUTE);
    await limiter.limit('k2', log, { now: NOW + 2 });
    expect((await limiter.peek('k', log, { now: NOW + 2 })).remaining).toBe(0);
    expect((await limiter.peek('k2', log, { now: NOW + 2 })).remaining).toBe(1);
    expect(store.stats().keys).toBe(2);
  });

  it('a sliding log under a countRejected flood keeps blocking and stays within capacity', async () => {
    const { limiter } = setup(10);
    const log: Policy = { algorithm: 'sliding-log', limit: 3, window: 1000, countRejected: true };
    for (let t = 0; t < 3; t++) expect((await limiter.limit('k', log, { now: NOW + t })).allowed).toBe(true);
    // Keep trying every 100 ms: each attempt is logged, so the caller never gets through.
    for (let t = 100; t < 5000; t += 100) {
      const decision = await limiter.limit('k', log, { now: NOW + t });
      expect(decision.allowed, `attempt at +${t}`).toBe(false);
    }
    // After one quiet window, it passes again.
    expect((await limiter.limit('k', log, { now: NOW + 4900 + 1000 })).allowed).toBe(true);
  });

  it('grows past its initial arrays without losing state', async () => {
    const { store, limiter } = setup(5000);
    for (let i = 0; i < 5000; i++) await limiter.limit(`k${i}`, PER_MINUTE, { now: NOW, cost: 1 + (i % 10) });
    expect(store.stats().keys).toBe(5000);
    for (let i = 0; i < 5000; i += 499) {
      expect((await limiter.peek(`k${i}`, PER_MINUTE, { now: NOW })).remaining).toBe(Math.max(0, 8 - (i % 10)));
    }
  });
});
