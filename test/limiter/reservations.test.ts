/**
 * Reserve then settle through the limiter: what it refuses (bad input, algorithms where a refund
 * has no meaning here, a store that keeps no reservations), what a store that is down does to a
 * reserve (the failure mode) and to a settle (rejected, safe to retry), and the over-limit cache
 * forgetting a key a settle refunded. The answers themselves: test/vectors/reservations/ and
 * test/model/reservations.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { InvalidCostError, InvalidOptionError, InvalidTimeError, StoreUnavailableError, createLimiter, memoryStore, redisStore, type Policy } from '../../src/index.js';
import { FaultyStore } from '../model/faulty-store.js';
import { freePort } from '../support/redis.js';

const NOW = 1_800_000_000_000;
const BUCKET: Policy = { algorithm: 'token-bucket', limit: 10, window: 1000 };

describe('reserve and settle refuse what they cannot do', () => {
  const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });

  it.each([
    ['no id', { cost: 1 }, InvalidOptionError, /id must be a string/],
    ['an empty id', { cost: 1, id: '' }, InvalidOptionError, /id must be a string/],
    ['an id of 257 characters', { cost: 1, id: 'x'.repeat(257) }, InvalidOptionError, /1 to 256 characters/],
    ['a cost of 0', { cost: 0, id: 'a' }, InvalidCostError, /whole number ≥ 1/],
    ['a fractional cost', { cost: 1.5, id: 'a' }, InvalidCostError, /whole number ≥ 1/],
    ['a ttl of 0', { cost: 1, id: 'a', ttl: 0 }, InvalidOptionError, /ttl/],
    ['a ttl past a day', { cost: 1, id: 'a', ttl: 86_400_001 }, InvalidOptionError, /ttl/],
    ['a misspelt option', { cost: 1, id: 'a', tll: 5 }, InvalidOptionError, /unknown option "tll"/],
    ['a bad now', { cost: 1, id: 'a', now: -1 }, InvalidTimeError, /now must be/],
    ['no options', undefined, InvalidOptionError, /options must be an object/],
  ])('a reserve with %s', async (_, options, type, message) => {
    const call = limiter.reserve('k', BUCKET, options as never);
    await expect(call).rejects.toThrow(type);
    await expect(call).rejects.toThrow(message);
  });

  it.each([
    ['a negative cost', { id: 'a', cost: -1 }, InvalidCostError, /whole number ≥ 0/],
    ['no cost', { id: 'a' }, InvalidCostError, /whole number ≥ 0/],
    ['a ttl (a settle has none)', { id: 'a', cost: 1, ttl: 5 }, InvalidOptionError, /unknown option "ttl"/],
  ])('a settle with %s', async (_, options, type, message) => {
    const call = limiter.settle('k', BUCKET, options as never);
    await expect(call).rejects.toThrow(type);
    await expect(call).rejects.toThrow(message);
  });

  it('a shared capacity is refused, naming limit() with the actual cost; every algorithm, a sliding window of any precision, takes reservations', async () => {
    const shared: Policy = { algorithm: 'fixed-window', limit: 5, window: 1000, share: { group: 'g', weight: 1 } };
    await expect(limiter.reserve('k', shared, { cost: 1, id: 'a' })).rejects.toThrow(/shared capacity \(share\): use limit\(\) with the actual cost/);
    await expect(limiter.settle('k', shared, { cost: 1, id: 'a' })).rejects.toThrow(InvalidOptionError);
    for (const policy of [{ algorithm: 'sliding-log', limit: 5, window: 1000 }, { algorithm: 'sliding-window', limit: 5, window: 1000, precision: 10 }] as const) {
      expect(await limiter.reserve('ok', policy, { cost: 4, id: 'a', now: NOW })).toMatchObject({ allowed: true, remaining: 1 });
      expect(await limiter.settle('ok', policy, { cost: 1, id: 'a', now: NOW + 1 })).toMatchObject({ status: 'settled', decision: { remaining: 4 } });
    }
  });

  it('a calendar window and a policy with blockDuration take reservations: a cost past the capacity starts no block, a denial does', async () => {
    const month: Policy = { algorithm: 'fixed-window', limit: 10, window: 'month', timeZone: 'Europe/Paris' };
    expect(await limiter.reserve('cal', month, { cost: 4, id: 'a', now: NOW })).toMatchObject({ allowed: true, remaining: 6 });
    expect(await limiter.settle('cal', month, { cost: 1, id: 'a', now: NOW })).toMatchObject({ status: 'settled', decision: { remaining: 9 } });
    const blocking: Policy = { ...BUCKET, blockDuration: '1m' };
    expect(await limiter.reserve('pen', blocking, { cost: 11, id: 'a', now: NOW })).toMatchObject({ allowed: false, reason: 'cost-exceeds-capacity' });
    expect(await limiter.reserve('pen', blocking, { cost: 8, id: 'b', now: NOW })).toMatchObject({ allowed: true, remaining: 2 });
    expect(await limiter.reserve('pen', blocking, { cost: 5, id: 'c', now: NOW })).toMatchObject({ allowed: false, reason: 'blocked', retryAfter: 60_000 });
  });

  it('a store that keeps no reservations refuses them with a typed error', async () => {
    const other = createLimiter({ store: new FaultyStore(memoryStore(), 0) });
    await expect(other.reserve('k', BUCKET, { cost: 1, id: 'a' })).rejects.toThrow(/keeps no reservations/);
  });

  it('ids are per key and per policy: the same id elsewhere is another reservation', async () => {
    const fresh = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    expect((await fresh.reserve('k1', BUCKET, { cost: 6, id: 'same', now: NOW })).remaining).toBe(4);
    expect((await fresh.reserve('k2', BUCKET, { cost: 6, id: 'same', now: NOW })).remaining).toBe(4);
    expect((await fresh.reserve('k1', { ...BUCKET, window: 2000 }, { cost: 6, id: 'same', now: NOW })).remaining).toBe(4);
  });
});

describe('the memory store holds reservations in bounds', () => {
  it('at most maxKeys reservations are held: past it the oldest goes, standing at its estimate', async () => {
    const limiter = createLimiter({ store: memoryStore({ maxKeys: 3, sweepIntervalMs: 0 }) });
    for (const id of ['a', 'b', 'c', 'd']) expect((await limiter.reserve('k', BUCKET, { cost: 1, id, now: NOW })).allowed).toBe(true);
    expect((await limiter.settle('k', BUCKET, { cost: 0, id: 'a', now: NOW })).status).toBe('unknown');
    expect(await limiter.settle('k', BUCKET, { cost: 0, id: 'd', now: NOW })).toMatchObject({ status: 'settled', decision: { remaining: 7 } });
  });
});

describe('reserve and settle when the store is down', () => {
  async function deadRedis(): Promise<ReturnType<typeof redisStore>> {
    return redisStore({ url: `redis://127.0.0.1:${await freePort()}`, connectTimeoutMs: 300 });
  }

  it('a reserve is answered by the failure mode (open admits, closed refuses; nothing is booked), a settle rejects', async () => {
    const store = await deadRedis();
    try {
      const open = createLimiter({ store, failureMode: 'open' });
      expect(await open.reserve('k', BUCKET, { cost: 3, id: 'a' })).toMatchObject({ allowed: true, reason: 'fail-open' });
      expect(await open.reserve('k', BUCKET, { cost: 3, id: 'a', failureMode: 'closed' })).toMatchObject({ allowed: false, reason: 'fail-closed' });
      await expect(open.settle('k', BUCKET, { cost: 1, id: 'a' })).rejects.toThrow(StoreUnavailableError);
    } finally {
      await store.close();
    }
  });
});

describe('the over-limit cache and a settle', () => {
  it('a settle that refunds makes the cache forget the key: the next request is decided by the store', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), overLimitCache: true });
    expect((await limiter.reserve('k', BUCKET, { cost: 10, id: 'a', now: NOW })).remaining).toBe(0);
    expect((await limiter.limit('k', BUCKET, { now: NOW })).allowed).toBe(false);
    const settled = await limiter.settle('k', BUCKET, { cost: 2, id: 'a', now: NOW });
    expect(settled).toMatchObject({ status: 'settled', reserved: 10, cost: 2, decision: { remaining: 8 } });
    expect(await limiter.limit('k', BUCKET, { now: NOW })).toMatchObject({ allowed: true, remaining: 7 });
  });
});
