/**
 * Calendar windows on Redis TIME, on a real single Redis and a real 3-master Cluster (the vectors,
 * test/vectors/fixed-window-calendar.json, play them with an explicit `now`): the script counts in
 * the period holding Redis's clock among the boundaries this node sends, even when the node's clock
 * is hours off across a boundary; the key expires at the period's end; a Redis clock outside the
 * boundaries decides nothing and says why. The node's clock is moved by faking `Date` only.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { computePeriod } from '../../../src/algorithms/calendar.js';
import { InvalidTimeError, StoreError, compilePolicy, createLimiter, memoryStore, redisStore, type Policy, type RedisStore } from '../../../src/index.js';
import { useRedisTopologies } from '../../support/redis-topologies.js';
import { freePort, type RedisServer } from '../../support/redis.js';

const redis = useRedisTopologies();
const HOUR = 3_600_000;

function unique(name: string): string {
  return `${name}:${Math.random().toString(36).slice(2)}`;
}

/** A whole-hour zone whose next local midnight comes 1 to 3 hours from now (one exists: the offsets cover every hour). */
function zoneWithMidnightSoon(now: number): { zone: string; midnight: number } {
  for (let hours = -12; hours <= 14; hours++) {
    const zone = hours === 0 ? 'UTC' : `Etc/GMT${hours > 0 ? '-' : '+'}${Math.abs(hours)}`;
    const midnight = computePeriod('day', zone, now).end;
    if (midnight - now >= HOUR && midnight - now < 3 * HOUR) return { zone, midnight };
  }
  throw new Error('no zone has its midnight within 1 to 3 hours');
}

function serverOf(key: string, servers: readonly RedisServer[]): RedisServer {
  return servers.find((server) => server.cli('EXISTS', key).trim() === '1') ?? servers[0]!;
}

describe.each([
  ['single Redis', () => redis.open({ url: redis.single.url }), () => [redis.single]],
  ['Redis Cluster', () => redis.open({ cluster: redis.cluster.nodes }), () => redis.cluster.servers],
] as const)('calendar windows on %s', (_name, open: () => Promise<RedisStore>, servers: () => readonly RedisServer[]) => {
  afterEach(() => vi.useRealTimers());

  it("counts in the period of Redis's clock when this node's clock is 6 hours ahead, past the next midnight; the key expires at the period's end", async () => {
    const store = await open();
    const { zone, midnight } = zoneWithMidnightSoon(Date.now());
    const policy = compilePolicy({ algorithm: 'fixed-window', limit: 2, window: 'day', timeZone: zone });
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 6 * HOUR });
    const key = unique('skewed');
    const first = await store.consume(key, policy, 1, undefined);
    const second = await store.consume(key, policy, 1, undefined);
    vi.useRealTimers();
    // Redis's day, not the node's (which began at `midnight`).
    expect(first.now).toBeLessThan(midnight);
    expect(first).toMatchObject({ allowed: true, remaining: 1, resetAt: midnight });
    expect(second).toMatchObject({ allowed: true, remaining: 0, resetAt: midnight });
    const name = store.redisKey(key, policy);
    expect(Number(serverOf(name, servers()).cli('PEXPIRETIME', name).trim())).toBe(midnight);
  });

  it("refuses to decide when Redis's clock is outside the boundaries sent (the node's clock 3 days ahead), writing nothing", async () => {
    const store = await open();
    const policy = compilePolicy({ algorithm: 'fixed-window', limit: 2, window: 'day', timeZone: 'Europe/Paris' });
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 72 * HOUR });
    const key = unique('outside');
    const refused = store.consume(key, policy, 1, undefined);
    await expect(refused).rejects.toThrow(StoreError);
    await expect(refused).rejects.toThrow(/half a day or more from this node's .*synchronise the clocks/);
    vi.useRealTimers();
    const name = store.redisKey(key, policy);
    expect(servers().some((server) => server.cli('EXISTS', name).trim() === '1')).toBe(false);
    // With the clocks agreeing again, the same policy decides.
    expect((await store.consume(key, policy, 1, undefined)).allowed).toBe(true);
  });

  it("reserves and settles in the period of Redis's clock when this node's clock is 6 hours ahead, past the next midnight", async () => {
    const store = await open();
    const { zone, midnight } = zoneWithMidnightSoon(Date.now());
    const policy = compilePolicy({ algorithm: 'fixed-window', limit: 10, window: 'day', timeZone: zone });
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 6 * HOUR });
    const key = unique('reserve-skewed');
    const reserved = await store.reserve!(key, policy, { id: 'r', cost: 6, ttlMs: 60_000 }, undefined);
    const settled = await store.settle!(key, policy, { id: 'r', cost: 2 }, undefined);
    vi.useRealTimers();
    expect(reserved.now).toBeLessThan(midnight);
    expect(reserved).toMatchObject({ allowed: true, remaining: 4, resetAt: midnight });
    // The refund lands in the reservation's period: Redis's day, not the node's.
    expect(settled).toMatchObject({ status: 'settled', decision: { remaining: 8, resetAt: midnight } });
  });

  it("refuses a reserve and a settle when Redis's clock is outside the boundaries sent, writing nothing", async () => {
    const store = await open();
    const policy = compilePolicy({ algorithm: 'fixed-window', limit: 10, window: 'day', timeZone: 'Europe/Paris' });
    const key = unique('reserve-outside');
    expect((await store.reserve!(key, policy, { id: 'a', cost: 6, ttlMs: 60_000 }, undefined)).remaining).toBe(4);
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 72 * HOUR });
    const reserve = store.reserve!(key, policy, { id: 'b', cost: 1, ttlMs: 60_000 }, undefined);
    await expect(reserve).rejects.toThrow(StoreError);
    await expect(reserve).rejects.toThrow(/half a day or more from this node's .*synchronise the clocks/);
    await expect(store.settle!(key, policy, { id: 'a', cost: 0 }, undefined)).rejects.toThrow(/synchronise the clocks/);
    vi.useRealTimers();
    const name = store.redisKey(key, policy);
    expect(servers().some((server) => server.cli('EXISTS', `${name}:r:b`).trim() === '1')).toBe(false);
    // Nothing was settled nor reserved: a's estimate still stands, and its settle still refunds it.
    expect(await store.settle!(key, policy, { id: 'a', cost: 0 }, undefined)).toMatchObject({ status: 'settled', decision: { remaining: 10 } });
  });

  it('decides a calendar limit with another in one all-or-nothing group on Redis TIME', async () => {
    const store = await open();
    const month = compilePolicy({ algorithm: 'fixed-window', limit: 1, window: 'month', timeZone: 'America/New_York' });
    const minute = compilePolicy({ algorithm: 'fixed-window', limit: 5, window: '1m' });
    const key = unique('group');
    const [first] = await store.consumeAll([{ key, policy: month, cost: 1 }, { key, policy: minute, cost: 1 }], undefined, true);
    expect(first).toMatchObject({ allowed: true, resetAt: computePeriod('month', 'America/New_York', first!.now).end });
    const denied = await store.consumeAll([{ key, policy: month, cost: 1 }, { key, policy: minute, cost: 1 }], undefined, true);
    expect(denied.map((decision) => decision.allowed)).toEqual([false, true]);
    // The group was denied: the minute's count stayed at 1.
    expect((await store.peek(key, minute, 1, undefined)).remaining).toBe(3);
  });
});

describe('calendar key names', () => {
  it('name the unit and the zone after the fixed window tag', async () => {
    const store = await redis.open({ url: redis.single.url });
    const name = (policy: Policy): string => store.redisKey('user:42', compilePolicy(policy));
    expect(name({ algorithm: 'fixed-window', limit: 5, window: 'month', timeZone: 'Europe/Paris' })).toBe('tollgate:{user:42}fcmonth@Europe/Paris');
    expect(name({ algorithm: 'fixed-window', limit: 5, window: 'day' })).toBe('tollgate:{user:42}fcday@UTC');
  });
});

describe('calendar windows when Redis is away', () => {
  it("the local failure mode counts this node's share in the same calendar period", async () => {
    const store = redisStore({ url: `redis://127.0.0.1:${await freePort()}`, connectTimeoutMs: 100 });
    await store.ready().catch(() => undefined);
    const limiter = createLimiter({ store, expectedNodes: 2 });
    const now = Date.parse('2026-11-30T22:59:00Z'); // a minute before December in Paris
    const policy: Policy = { algorithm: 'fixed-window', limit: 4, window: 'month', timeZone: 'Europe/Paris' };
    const decision = await limiter.limit('k', policy, { now });
    expect(decision).toMatchObject({ allowed: true, limit: 2, reason: 'local-fallback', resetAt: Date.parse('2026-11-30T23:00:00Z') });
    await limiter.close();
    await store.close();
  });
});

describe('calendar windows at the end of time', () => {
  it.each([
    ['memory store', async () => memoryStore({ sweepIntervalMs: 0 })],
    ['single Redis', () => redis.open({ url: redis.single.url })],
  ] as const)('a now past the dates JavaScript holds is refused with an InvalidTimeError on the %s', async (_name, open) => {
    const limiter = createLimiter({ store: await open() });
    const policy: Policy = { algorithm: 'fixed-window', limit: 4, window: 'year' };
    await expect(limiter.limit('k', policy, { now: Number.MAX_SAFE_INTEGER })).rejects.toThrow(InvalidTimeError);
    // The limiter goes on deciding.
    expect((await limiter.limit('k', policy, { now: Date.parse('2027-01-01T00:00:00Z') })).allowed).toBe(true);
    await limiter.close();
  });
});
