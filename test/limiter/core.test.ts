/**
 * The limiter's public contract: bad input gets a typed error (and changes no state), denial is a
 * value, limit 0 denies everything, peek and reset behave, and policies are validated once.
 */
import { describe, expect, it } from 'vitest';
import {
  InvalidCostError,
  InvalidKeyError,
  InvalidOptionError,
  InvalidPolicyError,
  InvalidTimeError,
  TollgateError,
  compilePolicy,
  createLimiter,
  memoryStore,
  type Policy,
} from '../../src/index.js';
import { CompiledPolicy } from '../../src/policy.js';

const NOW = 1_700_000_000_000;
const GOOD: Policy = { algorithm: 'fixed-window', limit: 3, window: '1s' };

function newLimiter() {
  return createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
}

describe('policy validation', () => {
  const bad: [string, unknown, string, RegExp][] = [
    ['negative limit', { ...GOOD, limit: -1 }, 'limit', /limit must be a whole number ≥ 0, got -1/],
    ['fractional limit', { ...GOOD, limit: 2.5 }, 'limit', /whole number/],
    ['NaN limit', { ...GOOD, limit: Number.NaN }, 'limit', /finite number, got NaN/],
    ['infinite limit', { ...GOOD, limit: Infinity }, 'limit', /finite number, got Infinity/],
    ['string limit', { ...GOOD, limit: '10' }, 'limit', /finite number, got "10"/],
    ['missing limit', { algorithm: 'gcra', window: 1000 }, 'limit', /got undefined/],
    ['zero window', { ...GOOD, window: 0 }, 'window', /at least 1 ms/],
    ['zero window string', { ...GOOD, window: '0s' }, 'window', /zero/],
    ['malformed window', { ...GOOD, window: '1 minute' }, 'window', /not a duration/],
    ['fractional window string', { ...GOOD, window: '1.5s' }, 'window', /not a duration/],
    ['fractional window ms', { ...GOOD, window: 10.5 }, 'window', /whole number of milliseconds/],
    ['negative window', { ...GOOD, window: -5 }, 'window', /at least 1 ms/],
    ['unknown algorithm', { ...GOOD, algorithm: 'token_bucket' }, 'algorithm', /"token_bucket" is not one of token-bucket/],
    ['misspelt field', { ...GOOD, windw: '1s' }, 'windw', /unknown field "windw"/],
    ['burst zero', { algorithm: 'token-bucket', limit: 5, window: 1000, burst: 0 }, 'burst', /≥ 1/],
    ['softPercent negative', { ...GOOD, softPercent: -10 }, 'softPercent', /≥ 0/],
    ['softPercent huge', { ...GOOD, softPercent: 5000 }, 'softPercent', /above 1000/],
    ['countRejected on a bucket', { algorithm: 'token-bucket', limit: 5, window: 1000, countRejected: true }, 'countRejected', /sliding-log and fixed-window only/],
    ['countRejected not boolean', { algorithm: 'sliding-log', limit: 5, window: 1000, countRejected: 'yes' }, 'countRejected', /true or false/],
    ['windowStart on a sliding window', { algorithm: 'sliding-window', limit: 5, window: 1000, windowStart: 'first-hit' }, 'windowStart', /applies to fixed-window only, not sliding-window/],
    ['windowStart aligned on a bucket', { algorithm: 'token-bucket', limit: 5, window: 1000, windowStart: 'aligned' }, 'windowStart', /fixed-window only/],
    ['windowStart misspelt', { algorithm: 'fixed-window', limit: 5, window: 1000, windowStart: 'first_hit' }, 'windowStart', /windowStart must be 'aligned' or 'first-hit', got "first_hit"/],
    ['windowStart not a string', { algorithm: 'fixed-window', limit: 5, window: 1000, windowStart: true }, 'windowStart', /got true/],
    ['limit too large to count exactly', { algorithm: 'sliding-window', limit: 2 ** 52, window: '1w' }, 'limit', /too large to count exactly/],
    ['bucket too slow to fill', { algorithm: 'token-bucket', limit: 1, burst: 4_294_967_295, window: '1w' }, 'burst', /fills within 2251799813685248 ms/],
    ['not an object', 'fixed-window', 'policy', /expected an object/],
  ];

  it.each(bad)('%s is an InvalidPolicyError naming the field', async (_name, policy, field, message) => {
    const limiter = newLimiter();
    const error = await limiter.limit('k', policy as Policy).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidPolicyError);
    expect(error).toBeInstanceOf(TollgateError);
    expect((error as InvalidPolicyError).code).toBe('ERR_TOLLGATE_INVALID_POLICY');
    expect((error as InvalidPolicyError).field).toBe(field);
    expect((error as Error).message).toMatch(message);
  });

  it('accepts every duration unit and plain milliseconds', () => {
    const windows: [string | number, number][] = [
      ['500ms', 500],
      ['1s', 1_000],
      ['1m', 60_000],
      ['3h', 10_800_000],
      ['1d', 86_400_000],
      ['1w', 604_800_000],
      [250, 250],
    ];
    for (const [window, ms] of windows) expect(compilePolicy({ ...GOOD, window }).windowMs).toBe(ms);
  });

  it('burst is accepted and ignored by window algorithms, and is the capacity of buckets', () => {
    expect(compilePolicy({ ...GOOD, burst: 50 }).capacity).toBe(3);
    expect(compilePolicy({ algorithm: 'gcra', limit: 10, window: 1000, burst: 4 }).capacity).toBe(4);
    expect(compilePolicy({ algorithm: 'token-bucket', limit: 10, window: 1000 }).capacity).toBe(10);
  });

  it('soft throttling admits limit × (1 + softPercent/100): 100 with 10% admits 110', () => {
    const compiled = compilePolicy({ algorithm: 'fixed-window', limit: 100, window: '1m', softPercent: 10 });
    expect(compiled.capacity).toBe(110);
    expect(compiled.nominalCapacity).toBe(100);
  });

  it('a compiled policy is reused as is, and a policy object is compiled once', async () => {
    const compiled = compilePolicy(GOOD);
    expect(compiled).toBeInstanceOf(CompiledPolicy);
    expect(compilePolicy(compiled)).toBe(compiled);
    expect(Object.isFrozen(compiled)).toBe(true);
    const limiter = newLimiter();
    expect((await limiter.limit('k', compiled, { now: NOW })).remaining).toBe(2);
    // The same content, as a new literal, shares the state (same algorithm and window).
    expect((await limiter.limit('k', { ...GOOD }, { now: NOW })).remaining).toBe(1);
  });
});

describe('call validation', () => {
  const cases: [string, () => Promise<unknown>, new (...args: never[]) => TollgateError, string, RegExp][] = [
    ['empty key', () => newLimiter().limit('', GOOD), InvalidKeyError, 'ERR_TOLLGATE_INVALID_KEY', /key is empty/],
    ['non-string key', () => newLimiter().limit(42 as unknown as string, GOOD), InvalidKeyError, 'ERR_TOLLGATE_INVALID_KEY', /must be a string, got 42/],
    ['key over 1 KiB', () => newLimiter().limit('k'.repeat(1025), GOOD), InvalidKeyError, 'ERR_TOLLGATE_INVALID_KEY', /1025 bytes, over the 1024-byte limit/],
    ['multibyte key over 1 KiB', () => newLimiter().limit('é'.repeat(513), GOOD), InvalidKeyError, 'ERR_TOLLGATE_INVALID_KEY', /1026 bytes/],
    ['cost 0', () => newLimiter().limit('k', GOOD, { cost: 0 }), InvalidCostError, 'ERR_TOLLGATE_INVALID_COST', /whole number ≥ 1, got 0/],
    ['negative cost', () => newLimiter().limit('k', GOOD, { cost: -2 }), InvalidCostError, 'ERR_TOLLGATE_INVALID_COST', /got -2/],
    ['fractional cost', () => newLimiter().limit('k', GOOD, { cost: 1.5 }), InvalidCostError, 'ERR_TOLLGATE_INVALID_COST', /got 1.5/],
    ['NaN cost', () => newLimiter().limit('k', GOOD, { cost: Number.NaN }), InvalidCostError, 'ERR_TOLLGATE_INVALID_COST', /got NaN/],
    ['string cost', () => newLimiter().limit('k', GOOD, { cost: '2' as unknown as number }), InvalidCostError, 'ERR_TOLLGATE_INVALID_COST', /got "2"/],
    ['NaN now', () => newLimiter().limit('k', GOOD, { now: Number.NaN }), InvalidTimeError, 'ERR_TOLLGATE_INVALID_TIME', /got NaN/],
    ['negative now', () => newLimiter().limit('k', GOOD, { now: -1 }), InvalidTimeError, 'ERR_TOLLGATE_INVALID_TIME', /got -1/],
    ['clock returning garbage', () => createLimiter({ clock: () => Number.POSITIVE_INFINITY }).limit('k', GOOD), InvalidTimeError, 'ERR_TOLLGATE_INVALID_TIME', /got Infinity/],
    ['peek with bad cost', () => newLimiter().peek('k', GOOD, { cost: 0 }), InvalidCostError, 'ERR_TOLLGATE_INVALID_COST', /got 0/],
    ['reset with empty key', () => newLimiter().reset('', GOOD), InvalidKeyError, 'ERR_TOLLGATE_INVALID_KEY', /empty/],
  ];

  it.each(cases)('%s rejects with a typed error', async (_name, call, type, code, message) => {
    const error = await call().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(type);
    expect((error as TollgateError).code).toBe(code);
    expect((error as Error).message).toMatch(message);
  });

  it('a bad call changes no state', async () => {
    const limiter = newLimiter();
    await limiter.limit('k', GOOD, { now: NOW });
    await expect(limiter.limit('k', GOOD, { now: NOW, cost: 0 })).rejects.toBeInstanceOf(InvalidCostError);
    await expect(limiter.limit('k', GOOD, { now: Number.NaN })).rejects.toBeInstanceOf(InvalidTimeError);
    await expect(limiter.limit('k', { ...GOOD, limit: -3 }, { now: NOW })).rejects.toBeInstanceOf(InvalidPolicyError);
    expect((await limiter.limit('k', GOOD, { now: NOW })).remaining).toBe(1);
  });

  it('a key of exactly 1 KiB is accepted', async () => {
    expect((await newLimiter().limit('k'.repeat(1024), GOOD)).allowed).toBe(true);
  });

  it('errors are rejections, never synchronous throws', () => {
    expect(() => newLimiter().limit('', GOOD).catch(() => undefined)).not.toThrow();
  });
});

describe('options validation', () => {
  it('rejects unknown limiter options', () => {
    expect(() => createLimiter({ stor: memoryStore() } as never)).toThrow(InvalidOptionError);
    expect(() => createLimiter({ stor: memoryStore() } as never)).toThrow(/unknown option "stor"/);
  });
  it('rejects a store that is not a Store', () => {
    expect(() => createLimiter({ store: {} as never })).toThrow(/store must be a Store/);
  });
  it('rejects a clock that is not a function', () => {
    expect(() => createLimiter({ clock: 5 as never })).toThrow(/clock must be a function/);
  });
  it('rejects bad memory store options', () => {
    expect(() => memoryStore({ maxKeys: 0 })).toThrow(/maxKeys must be a whole number from 1/);
    expect(() => memoryStore({ maxKeys: 1.5 })).toThrow(InvalidOptionError);
    expect(() => memoryStore({ sweepIntervalMs: -1 })).toThrow(/sweepIntervalMs/);
    expect(() => memoryStore({ maxkeys: 10 } as never)).toThrow(/unknown option "maxkeys"/);
  });
});

describe('decisions', () => {
  it('denial is a value with allowed: false, never a rejected promise', async () => {
    const limiter = newLimiter();
    const policy: Policy = { algorithm: 'token-bucket', limit: 1, window: '1m' };
    expect((await limiter.limit('k', policy, { now: NOW })).allowed).toBe(true);
    const denied = await limiter.limit('k', policy, { now: NOW });
    expect(denied).toEqual({ allowed: false, limit: 1, remaining: 0, resetAt: NOW + 60_000, retryAfter: 60_000, now: NOW });
  });

  it('limit 0 denies everything, stores nothing, and suggests retrying after one window', async () => {
    const store = memoryStore({ sweepIntervalMs: 0 });
    const limiter = createLimiter({ store });
    for (const algorithm of ['token-bucket', 'fixed-window', 'sliding-log', 'gcra'] as const) {
      const decision = await limiter.limit('k', { algorithm, limit: 0, window: '1m' }, { now: NOW });
      expect(decision).toEqual({ allowed: false, limit: 0, remaining: 0, resetAt: NOW, retryAfter: 60_000, now: NOW, reason: 'limit-zero' });
    }
    expect(store.stats().keys).toBe(0);
  });

  it('a cost larger than the capacity is denied with a reason and consumes nothing', async () => {
    const limiter = newLimiter();
    const policy: Policy = { algorithm: 'gcra', limit: 10, window: 1000, burst: 5 };
    const decision = await limiter.limit('k', policy, { now: NOW, cost: 6 });
    expect(decision).toMatchObject({ allowed: false, reason: 'cost-exceeds-capacity', remaining: 5, retryAfter: 1000 });
    expect((await limiter.limit('k', policy, { now: NOW, cost: 5 })).allowed).toBe(true);
  });

  it('uses the clock when no now is given', async () => {
    let time = NOW;
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), clock: () => time });
    const policy: Policy = { algorithm: 'fixed-window', limit: 1, window: 1000 };
    expect((await limiter.limit('k', policy)).allowed).toBe(true);
    expect((await limiter.limit('k', policy)).allowed).toBe(false);
    time += 1000;
    expect((await limiter.limit('k', policy)).allowed).toBe(true);
  });

  it('without a clock or now, decisions use the current time', async () => {
    const before = Date.now();
    const decision = await newLimiter().limit('k', { algorithm: 'fixed-window', limit: 1, window: '1h' });
    expect(decision.resetAt).toBeGreaterThan(before);
    expect(decision.resetAt).toBeLessThanOrEqual(Date.now() + 3_600_000);
  });

  it('peek reports what limit would answer and records nothing', async () => {
    const limiter = newLimiter();
    const peeked = await limiter.peek('k', GOOD, { now: NOW });
    expect(peeked).toEqual(await limiter.peek('k', GOOD, { now: NOW }));
    expect(await limiter.limit('k', GOOD, { now: NOW })).toEqual(peeked);
  });

  it('reset forgets the key', async () => {
    const limiter = newLimiter();
    for (let i = 0; i < 3; i++) await limiter.limit('k', GOOD, { now: NOW });
    expect((await limiter.limit('k', GOOD, { now: NOW })).allowed).toBe(false);
    await limiter.reset('k', GOOD);
    expect((await limiter.limit('k', GOOD, { now: NOW })).remaining).toBe(2);
  });

  it('keys are independent, and the same key under another algorithm or window is another counter', async () => {
    const limiter = newLimiter();
    for (let i = 0; i < 3; i++) await limiter.limit('a', GOOD, { now: NOW });
    expect((await limiter.limit('a', GOOD, { now: NOW })).allowed).toBe(false);
    expect((await limiter.limit('b', GOOD, { now: NOW })).allowed).toBe(true);
    expect((await limiter.limit('a', { ...GOOD, window: '2s' }, { now: NOW })).allowed).toBe(true);
    expect((await limiter.limit('a', { ...GOOD, algorithm: 'sliding-log' }, { now: NOW })).allowed).toBe(true);
  });

  it('raising the limit keeps the counter (state is per algorithm and window)', async () => {
    const limiter = newLimiter();
    for (let i = 0; i < 3; i++) await limiter.limit('k', GOOD, { now: NOW });
    expect((await limiter.limit('k', { ...GOOD, limit: 5 }, { now: NOW })).remaining).toBe(1);
  });

  it('concurrent calls on one key admit exactly the limit', async () => {
    const limiter = newLimiter();
    for (const algorithm of ['token-bucket', 'leaky-bucket', 'fixed-window', 'sliding-log', 'sliding-window', 'gcra'] as const) {
      const policy: Policy = { algorithm, limit: 1000, window: '1h' };
      const decisions = await Promise.all(Array.from({ length: 5000 }, () => limiter.limit(`hot:${algorithm}`, policy, { now: NOW })));
      expect(decisions.filter((d) => d.allowed).length, algorithm).toBe(1000);
    }
  });
});

describe('regressions', () => {
  it('a cached valid policy does not let an equal-looking invalid one through', async () => {
    const limiter = newLimiter();
    const valid: Policy = { algorithm: 'token-bucket', limit: 10, window: 1000 };
    await limiter.limit('k', valid, { now: NOW });
    for (const invalid of [
      { ...valid, limit: '10' },
      { ...valid, window: '1000' },
      { ...valid, limit: [10] },
      { ...valid, burst: null },
      { ...valid, burst: '10' },
    ]) {
      await expect(limiter.limit('k', invalid as unknown as Policy, { now: NOW }), JSON.stringify(invalid)).rejects.toBeInstanceOf(InvalidPolicyError);
    }
  });

  it('per-call options are validated: not an object, or a misspelt option', async () => {
    const limiter = newLimiter();
    await expect(limiter.limit('k', GOOD, null as never)).rejects.toThrow(/call options must be an object/);
    await expect(limiter.limit('k', GOOD, { costs: 3 } as never)).rejects.toThrow(/unknown call option "costs"/);
    await expect(limiter.limit('k', GOOD, { costs: 3 } as never)).rejects.toBeInstanceOf(InvalidOptionError);
  });

  it('createLimiter({ store: null }) is an error, not the default store', () => {
    expect(() => createLimiter({ store: null as never })).toThrow(/store must be a Store/);
  });

  it('limit 0 with a burst still reports limit 0', async () => {
    const decision = await newLimiter().limit('k', { algorithm: 'token-bucket', limit: 0, burst: 5, window: 1000 }, { now: NOW });
    expect(decision).toMatchObject({ allowed: false, limit: 0, remaining: 0, reason: 'limit-zero' });
  });
});

describe('limitAll (multi-limit checks) on the memory store', () => {
  it('is all-or-nothing: when one limit denies, no other counter moves', async () => {
    const limiter = newLimiter();
    const perIp: Policy = { algorithm: 'token-bucket', limit: 10, window: '1m' };
    const perUser: Policy = { algorithm: 'fixed-window', limit: 1, window: '1m' };
    const both = [
      { key: 'ip:1', policy: perIp, cost: 2 },
      { key: 'user:1', policy: perUser },
    ];
    expect((await limiter.limitAll(both, { now: NOW })).map((d) => d.allowed)).toEqual([true, true]);
    expect((await limiter.limitAll(both, { now: NOW })).map((d) => d.allowed)).toEqual([true, false]);
    expect((await limiter.peek('ip:1', perIp, { now: NOW })).remaining).toBe(7);
  });

  it('still logs a denied countRejected attempt, and a limit of 0 denies the whole request', async () => {
    const limiter = newLimiter();
    const log: Policy = { algorithm: 'sliding-log', limit: 1, window: 1000, countRejected: true };
    const bucket: Policy = { algorithm: 'gcra', limit: 5, window: 1000 };
    await limiter.limitAll([{ key: 'u', policy: log }], { now: NOW });
    const denied = await limiter.limitAll([{ key: 'u', policy: log }, { key: 'b', policy: bucket }], { now: NOW + 500 });
    expect(denied.map((d) => d.allowed)).toEqual([false, true]);
    // The rejected attempt at +500 was logged: the caller stays blocked until +1500.
    expect((await limiter.peek('u', log, { now: NOW + 1000 })).allowed).toBe(false);
    expect((await limiter.peek('b', bucket, { now: NOW + 500 })).remaining).toBe(4);
    const zero = await limiter.limitAll([{ key: 'b', policy: bucket }, { key: 'z', policy: { ...bucket, limit: 0 } }], { now: NOW + 500 });
    expect(zero.map((d) => d.reason)).toEqual([undefined, 'limit-zero']);
    expect((await limiter.peek('b', bucket, { now: NOW + 500 })).remaining).toBe(4);
  });

  it('validates every request before deciding any', async () => {
    const limiter = newLimiter();
    await expect(limiter.limitAll('x' as never)).rejects.toThrow(/limitAll takes an array/);
    await expect(limiter.limitAll(Array.from({ length: 65 }, () => ({ key: 'k', policy: GOOD })))).rejects.toThrow(/at most 64 .*, got an array of 65$/);
    await expect(limiter.limitAll([{ key: 'k', policy: GOOD }, { key: '', policy: GOOD }], { now: NOW })).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(limiter.limitAll([{ key: 'k', policy: GOOD, cost: 0 }])).rejects.toBeInstanceOf(InvalidCostError);
    expect((await limiter.peek('k', GOOD, { now: NOW })).remaining).toBe(2);
    expect(await limiter.limitAll([])).toEqual([]);
  });
});

describe('look: the quota as it stands', () => {
  it('reports what a limit just reported, spends nothing, and is never refused', async () => {
    const limiter = newLimiter();
    const policy: Policy = { algorithm: 'token-bucket', limit: 10, window: '1s' };
    const spent = await limiter.limit('k', policy, { now: NOW });
    const looked = await limiter.look('k', policy, { now: NOW });
    expect(looked).toEqual({ ...spent, allowed: true, retryAfter: 0 });
    for (let i = 0; i < 9; i++) await limiter.limit('k', policy, { now: NOW });
    expect(await limiter.look('k', policy, { now: NOW })).toMatchObject({ allowed: true, remaining: 0, retryAfter: 0, resetAt: NOW + 1000 });
    expect((await limiter.limit('k', policy, { now: NOW })).allowed).toBe(false);
  });
});
