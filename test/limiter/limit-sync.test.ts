/**
 * `limiter.limitSync`, the synchronous form of `limit`, through the public `createLimiter`: on the
 * memory store it answers the decision itself (no promise), exactly what `limit` answers and records;
 * bad input throws the typed errors `limit` rejects with and changes nothing; on a store that answers
 * asynchronously (Redis) it refuses before deciding anything.
 */
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../src/algorithms/catalog.js';
import {
  InvalidCostError,
  InvalidKeyError,
  InvalidOptionError,
  InvalidPolicyError,
  InvalidTimeError,
  createLimiter,
  memoryStore,
  redisStore,
  type Decision,
  type Policy,
} from '../../src/index.js';
import { useRedisServer } from '../support/redis-topologies.js';

const NOW = 1_700_000_000_000;

function newLimiter(options: { clock?: () => number } = {}) {
  return createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), ...options });
}

describe('limitSync on the memory store', () => {
  it.each(ALGORITHMS.map((algorithm) => [algorithm]))('%s: answers what limit answers, call for call, with no promise', async (algorithm) => {
    const policy: Policy = { algorithm, limit: 3, window: '1s' };
    const sync = newLimiter();
    const promised = newLimiter();
    // A burst past the limit, some time passing, and costs of 1 and 2.
    const steps = [0, 0, 1, 2, 2, 400, 999, 1000, 1001, 1500, 2600].map((offset, i) => ({ now: NOW + offset, cost: 1 + (i % 2) }));
    for (const step of steps) {
      const decision = sync.limitSync('user:1', policy, step);
      expect(decision).not.toBeInstanceOf(Promise);
      expect(decision).toEqual(await promised.limit('user:1', policy, step));
    }
  });

  it('records what it admits: limit and peek see it afterwards', async () => {
    const limiter = newLimiter();
    const policy: Policy = { algorithm: 'fixed-window', limit: 3, window: '1m' };
    const allowed = [1, 2, 3, 4].map(() => limiter.limitSync('user:2', policy, { now: NOW }).allowed);
    expect(allowed).toEqual([true, true, true, false]);
    expect((await limiter.peek('user:2', policy, { now: NOW })).allowed).toBe(false);
    await limiter.limit('user:3', policy, { now: NOW });
    expect(limiter.limitSync('user:3', policy, { now: NOW }).remaining).toBe(1);
  });

  it('takes its time from the limiter clock, else the process clock', () => {
    let now = NOW;
    const clocked = newLimiter({ clock: () => now });
    const policy: Policy = { algorithm: 'token-bucket', limit: 1, window: '1s' };
    expect(clocked.limitSync('k', policy).now).toBe(NOW);
    expect(clocked.limitSync('k', policy).allowed).toBe(false);
    now += 1000;
    expect(clocked.limitSync('k', policy)).toMatchObject({ allowed: true, now: NOW + 1000 });
    const before = Date.now();
    const decided = newLimiter().limitSync('k', policy).now;
    expect(decided).toBeGreaterThanOrEqual(before);
    expect(decided).toBeLessThanOrEqual(Date.now());
  });

  it('answers a limit of 0 and a cost over the capacity like limit', async () => {
    const limiter = newLimiter();
    expect(limiter.limitSync('k', { algorithm: 'gcra', limit: 0, window: '1s' }, { now: NOW })).toMatchObject({ allowed: false, reason: 'limit-zero' });
    const tooBig = limiter.limitSync('k', { algorithm: 'gcra', limit: 2, window: '1s' }, { now: NOW, cost: 3 });
    expect(tooBig).toEqual(await newLimiter().limit('k', { algorithm: 'gcra', limit: 2, window: '1s' }, { now: NOW, cost: 3 }));
    expect(tooBig.reason).toBe('cost-exceeds-capacity');
  });

  it('takes a lease like limit (decided in-process, synchronously)', () => {
    const limiter = newLimiter();
    const policy: Policy = { algorithm: 'fixed-window', limit: 10, window: '1m' };
    const decisions: Decision[] = [];
    for (let i = 0; i < 12; i++) decisions.push(limiter.limitSync('leased', policy, { now: NOW, lease: 5 }));
    expect(decisions.every((decision) => !(decision instanceof Promise))).toBe(true);
    expect(decisions.filter((decision) => decision.allowed)).toHaveLength(10);
  });

  it.each(ALGORITHMS.map((algorithm) => [algorithm]))('%s: with the over-limit cache, a penalty and countRejected, answers what limit answers, call for call', async (algorithm) => {
    const policy: Policy = { algorithm, limit: 2, window: '1s', blockDuration: '3s', ...(algorithm === 'sliding-log' || algorithm === 'fixed-window' ? { countRejected: true } : {}) };
    const sync = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), overLimitCache: true });
    const promised = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), overLimitCache: true });
    for (const offset of [0, 0, 0, 1, 500, 1000, 2999, 3001, 3002, 3003, 7000]) {
      const decision = sync.limitSync('user:1', policy, { now: NOW + offset });
      expect(decision).toEqual(await promised.limit('user:1', policy, { now: NOW + offset }));
    }
    expect(sync.overLimitCacheStats()).toEqual(promised.overLimitCacheStats());
  });

  it('one over-limit cache for calls with and without a lease: a denial remembered by either answers both, a reset forgets it for both', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), overLimitCache: true });
    const policy: Policy = { algorithm: 'fixed-window', limit: 2, window: '1m' };
    const decisions = [1, 2, 3].map(() => limiter.limitSync('k', policy, { now: NOW }));
    expect(decisions.map((decision) => decision.allowed)).toEqual([true, true, false]);
    expect(limiter.overLimitCacheStats()).toMatchObject({ hits: 0, keys: 1 });
    // A lease call enters the stack above the lease layer; the plain calls above entered below it.
    expect(limiter.limitSync('k', policy, { now: NOW + 1, lease: 5 })).toMatchObject({ allowed: false, retryAfter: decisions[2]!.retryAfter - 1 });
    expect(limiter.overLimitCacheStats()).toMatchObject({ hits: 1, keys: 1 });
    expect(limiter.limitSync('k', policy, { now: NOW + 2 }).allowed).toBe(false);
    expect(limiter.overLimitCacheStats()).toMatchObject({ hits: 2 });
    await limiter.reset('k', policy);
    expect(limiter.overLimitCacheStats()).toMatchObject({ keys: 0 });
    expect(limiter.limitSync('k', policy, { now: NOW + 3 }).allowed).toBe(true);
    expect(limiter.limitSync('k', policy, { now: NOW + 3, lease: 2 }).allowed).toBe(true);
  });

  const bad: [string, () => unknown, new (...args: never[]) => Error, RegExp][] = [
    ['a key that is not a string', () => newLimiter().limitSync(42 as unknown as string, { algorithm: 'gcra', limit: 1, window: '1s' }), InvalidKeyError, /key must be a string, got 42/],
    ['an empty key', () => newLimiter().limitSync('', { algorithm: 'gcra', limit: 1, window: '1s' }), InvalidKeyError, /key is empty/],
    ['a fractional cost', () => newLimiter().limitSync('k', { algorithm: 'gcra', limit: 1, window: '1s' }, { cost: 1.5 }), InvalidCostError, /cost must be a whole number ≥ 1, got 1.5/],
    ['a negative now', () => newLimiter().limitSync('k', { algorithm: 'gcra', limit: 1, window: '1s' }, { now: -1 }), InvalidTimeError, /now must be a finite epoch time/],
    ['a bad policy', () => newLimiter().limitSync('k', { algorithm: 'gcra', limit: -1, window: '1s' }), InvalidPolicyError, /limit must be a whole number ≥ 0/],
    ['a misspelt option', () => newLimiter().limitSync('k', { algorithm: 'gcra', limit: 1, window: '1s' }, { costs: 2 } as never), InvalidOptionError, /costs/],
    [
      'local-first (syncIntervalMs)',
      () => newLimiter().limitSync('k', { algorithm: 'fixed-window', limit: 1, window: '1s' }, { syncIntervalMs: 100 }),
      InvalidOptionError,
      /limitSync does not take syncIntervalMs/,
    ],
  ];
  it.each(bad)('throws (does not return a rejected promise) for %s', (_name, call, type, message) => {
    expect(call).toThrow(type);
    expect(call).toThrow(message);
  });

  it('records nothing when the input is bad', () => {
    const limiter = newLimiter();
    const policy: Policy = { algorithm: 'fixed-window', limit: 1, window: '1m' };
    expect(() => limiter.limitSync('k', policy, { now: NOW, cost: 0 })).toThrow(InvalidCostError);
    expect(limiter.limitSync('k', policy, { now: NOW }).allowed).toBe(true);
  });
});

describe('limitSync on a store that answers asynchronously', () => {
  const redis = useRedisServer();

  it('throws InvalidOptionError before deciding anything; limit still works', async () => {
    const store = redisStore({ url: redis.url });
    redis.stores.push(store);
    await store.ready();
    const limiter = createLimiter({ store, deadlineMs: 5_000 });
    const policy: Policy = { algorithm: 'fixed-window', limit: 1, window: '1h' };
    const key = `sync-${Math.random().toString(36).slice(2)}`;
    expect(() => limiter.limitSync(key, policy, { now: NOW })).toThrow(InvalidOptionError);
    expect(() => limiter.limitSync(key, policy, { now: NOW })).toThrow(/limitSync decides on the memory store only; the redis store answers asynchronously: use await limiter.limit/);
    // Nothing was recorded: the one request of the hour is still there.
    expect((await limiter.limit(key, policy, { now: NOW })).allowed).toBe(true);
  });
});
