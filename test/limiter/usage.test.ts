/**
 * `limiter.usage(key, policy)`: what is used of a quota and over which period, for every algorithm
 * (a calendar month included), spending nothing, on the memory store, a single Redis and a
 * 3-master Redis Cluster, at explicit instants (docs/semantics.md, Usage).
 */
import { describe, expect, it } from 'vitest';
import { createLimiterCore, type LimiterCore } from '../../src/limiter/core.js';
import type { Policy } from '../../src/policy.js';
import { InvalidKeyError, InvalidOptionError, InvalidPolicyError, InvalidTimeError } from '../../src/errors.js';
import { storeTopologies, useRedisTopologies } from '../support/redis-topologies.js';

const MINUTE = 60_000;
const NOW = 1_700_000_040_000; // a whole minute (UTC)
const redis = useRedisTopologies();

describe.each(storeTopologies(redis))('usage on the $name', (topology) => {
  const open = async (): Promise<LimiterCore> => createLimiterCore({ store: await topology.open() });
  const id = (name: string) => `usage:${name}:${topology.name}:${Math.random().toString(36).slice(2)}`;
  /** Spends `cost` at each of `at`. */
  const spend = async (limiter: LimiterCore, key: string, policy: Policy, at: readonly number[], cost = 1) => {
    for (const now of at) expect((await limiter.limit(key, policy, { now, cost })).allowed).toBe(true);
  };

  it('fixed window: used is the window count, the period the aligned window; a fresh key gets the window it is in', async () => {
    const limiter = await open();
    const policy: Policy = { algorithm: 'fixed-window', limit: 10, window: '1m' };
    const key = id('fixed');
    expect(await limiter.usage(key, policy, { now: NOW + 5_000 })).toEqual({ used: 0, limit: 10, periodStart: NOW, periodEnd: NOW + MINUTE });
    await spend(limiter, key, policy, [NOW + 1_000], 3);
    expect(await limiter.usage(key, policy, { now: NOW + 10_000 })).toEqual({ used: 3, limit: 10, periodStart: NOW, periodEnd: NOW + MINUTE });
    expect(await limiter.usage(key, policy, { now: NOW + MINUTE })).toEqual({ used: 0, limit: 10, periodStart: NOW + MINUTE, periodEnd: NOW + 2 * MINUTE });
  });

  it('first-hit fixed window: the period starts at the first hit; before one, it would start now', async () => {
    const limiter = await open();
    const policy: Policy = { algorithm: 'fixed-window', limit: 5, window: '1m', windowStart: 'first-hit' };
    const key = id('first-hit');
    expect(await limiter.usage(key, policy, { now: NOW + 7 })).toEqual({ used: 0, limit: 5, periodStart: NOW + 7, periodEnd: NOW + 7 + MINUTE });
    await spend(limiter, key, policy, [NOW + 7, NOW + 20_000]);
    expect(await limiter.usage(key, policy, { now: NOW + 30_000 })).toEqual({ used: 2, limit: 5, periodStart: NOW + 7, periodEnd: NOW + 7 + MINUTE });
  });

  it('calendar month in Europe/Paris: the period is the month in Paris', async () => {
    const limiter = await open();
    const policy: Policy = { algorithm: 'fixed-window', limit: 1000, window: 'month', timeZone: 'Europe/Paris' };
    const key = id('month');
    const november = [Date.parse('2026-10-31T23:00:00Z'), Date.parse('2026-11-30T23:00:00Z')]; // CET, UTC+1
    await spend(limiter, key, policy, [Date.parse('2026-11-02T10:00:00Z'), Date.parse('2026-11-20T10:00:00Z')], 7);
    expect(await limiter.usage(key, policy, { now: Date.parse('2026-11-25T00:00:00Z') })).toEqual({ used: 14, limit: 1000, periodStart: november[0], periodEnd: november[1] });
    // 23:30 UTC on the 30th is already December in Paris: a new period, nothing used.
    expect(await limiter.usage(key, policy, { now: Date.parse('2026-11-30T23:30:00Z') })).toEqual({
      used: 0,
      limit: 1000,
      periodStart: november[1],
      periodEnd: Date.parse('2026-12-31T23:00:00Z'),
    });
  });

  it('calendar day in America/New_York on the day DST ends: the period is that day, 25 hours long', async () => {
    const limiter = await open();
    const policy: Policy = { algorithm: 'fixed-window', limit: 100, window: 'day', timeZone: 'America/New_York' };
    const key = id('day');
    // 1 November 2026: EDT (UTC−4) until 2:00, then EST (UTC−5).
    const day = [Date.parse('2026-11-01T04:00:00Z'), Date.parse('2026-11-02T05:00:00Z')];
    await spend(limiter, key, policy, [Date.parse('2026-11-01T05:30:00Z'), Date.parse('2026-11-02T04:30:00Z')], 2);
    expect(await limiter.usage(key, policy, { now: Date.parse('2026-11-02T04:59:59Z') })).toEqual({ used: 4, limit: 100, periodStart: day[0], periodEnd: day[1] });
    expect(day[1]! - day[0]!).toBe(25 * 3_600_000);
  });

  it.each(['token-bucket', 'leaky-bucket', 'gcra'] as const)('%s: used is burst − available tokens, the period runs until the bucket is full again', async (algorithm) => {
    const limiter = await open();
    const policy: Policy = { algorithm, limit: 10, window: '10s' }; // a token a second
    const key = id(algorithm);
    expect(await limiter.usage(key, policy, { now: NOW })).toEqual({ used: 0, limit: 10, periodStart: NOW, periodEnd: NOW });
    await spend(limiter, key, policy, [NOW], 4);
    expect(await limiter.usage(key, policy, { now: NOW + 1_000 })).toEqual({ used: 3, limit: 10, periodStart: NOW + 1_000, periodEnd: NOW + 4_000 });
    // Half a token drained: the bucket still holds part of one, so one is in use.
    expect(await limiter.usage(key, policy, { now: NOW + 3_500 })).toEqual({ used: 1, limit: 10, periodStart: NOW + 3_500, periodEnd: NOW + 4_000 });
  });

  it('sliding log: used is the weight of the entries in the rolling window (now − W, now]', async () => {
    const limiter = await open();
    const policy: Policy = { algorithm: 'sliding-log', limit: 5, window: '1m' };
    const key = id('log');
    await spend(limiter, key, policy, [NOW, NOW + 30_000]);
    const at = NOW + 45_000;
    expect(await limiter.usage(key, policy, { now: at })).toEqual({ used: 2, limit: 5, periodStart: at - MINUTE + 1, periodEnd: at + 1 });
    expect((await limiter.usage(key, policy, { now: NOW + MINUTE })).used).toBe(1); // the first entry left at NOW + W
  });

  it('sliding window: used is the estimate, the previous window weighted by its share still inside', async () => {
    const limiter = await open();
    const policy: Policy = { algorithm: 'sliding-window', limit: 10, window: '1m' };
    const key = id('sliding');
    await spend(limiter, key, policy, [NOW + 1_000], 4);
    await spend(limiter, key, policy, [NOW + MINUTE + 1_000]);
    const at = NOW + MINUTE + 30_000; // half the previous window still inside: 4 × 1/2 + 1
    expect(await limiter.usage(key, policy, { now: at })).toEqual({ used: 3, limit: 10, periodStart: at - MINUTE + 1, periodEnd: at + 1 });
  });

  it('spends nothing: the quota is whole after any number of usage calls', async () => {
    const limiter = await open();
    const policy: Policy = { algorithm: 'fixed-window', limit: 2, window: '1m' };
    const key = id('free');
    await spend(limiter, key, policy, [NOW]);
    for (let i = 0; i < 5; i++) expect((await limiter.usage(key, policy, { now: NOW + i })).used).toBe(1);
    expect(await limiter.limit(key, policy, { now: NOW + 10 })).toMatchObject({ allowed: true, remaining: 0 });
    expect(await limiter.usage(key, policy, { now: NOW + 11 })).toMatchObject({ used: 2, limit: 2 });
  });

  it('refuses bad input with typed errors', async () => {
    const limiter = await open();
    const policy: Policy = { algorithm: 'fixed-window', limit: 2, window: '1m' };
    await expect(limiter.usage('', policy)).rejects.toBeInstanceOf(InvalidKeyError);
    await expect(limiter.usage('k', { ...policy, limit: -1 })).rejects.toBeInstanceOf(InvalidPolicyError);
    await expect(limiter.usage('k', policy, { now: -5 })).rejects.toBeInstanceOf(InvalidTimeError);
    await expect(limiter.usage('k', policy, { cost: 2 } as never)).rejects.toBeInstanceOf(InvalidOptionError);
  });
});
