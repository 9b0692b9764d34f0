/**
 * The usage ledger (docs/quotas.md §3): per key and period what was admitted (and refused, when
 * asked), a retry with the same request id billed once, kept `keep` periods, exported in pages —
 * on the memory store, one Redis and a Redis Cluster; and what happens at its bounds and on failure.
 */
import { describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createLimiterCore, type LimiterCore } from '../../src/limiter/core.js';
import type { LedgerRow } from '../../src/limiter/index.js';
import type { Policy } from '../../src/policy.js';
import { memoryStore } from '../../src/store/memory.js';
import { InvalidOptionError, InvalidPolicyError } from '../../src/errors.js';
import { storeTopologies, useRedisTopologies } from '../support/redis-topologies.js';
import { freePort } from '../support/redis.js';
import { redisStore } from '../../src/store/redis/index.js';

const redis = useRedisTopologies();
const NOV_2 = Date.parse('2027-11-02T10:00:00Z');
const DAY = 86_400_000;
/** A month of 5 per key, billed by calendar month in UTC, refusals counted. */
const MONTHLY: Policy = { algorithm: 'fixed-window', limit: 5, window: 'month', ledger: { refused: true, keep: 2 } };

async function rows(limiter: LimiterCore, period: string, options: { timeZone?: string; now?: number } = {}): Promise<LedgerRow[]> {
  const all: LedgerRow[] = [];
  for await (const row of limiter.ledger.export({ period, now: NOV_2, ...options })) all.push(row);
  return all.sort((a, b) => a.key.localeCompare(b.key));
}

const unique = (name: string): string => `${name}-${Math.random().toString(36).slice(2)}`;

describe.each(storeTopologies(redis))('the usage ledger on the $name', (topology) => {
  it('sums admitted and refused units per key and month; a retry with the same request id is billed once', async () => {
    const limiter = createLimiterCore({ store: await topology.open(), deadlineMs: 10_000 });
    const [a, b] = [unique('ledger:a'), unique('ledger:b')];
    expect((await limiter.limit(a, MONTHLY, { now: NOV_2, cost: 2, requestId: 'r1' })).allowed).toBe(true);
    // The client retries r1: the quota counts it again, the bill does not.
    expect((await limiter.limit(a, MONTHLY, { now: NOV_2 + 1, cost: 2, requestId: 'r1' })).allowed).toBe(true);
    expect((await limiter.limit(a, MONTHLY, { now: NOV_2 + 2, cost: 1, requestId: 'r2' })).allowed).toBe(true);
    expect((await limiter.limit(a, MONTHLY, { now: NOV_2 + 3, cost: 3 })).allowed).toBe(false);
    expect((await limiter.limit(b, MONTHLY, { now: NOV_2 + 4 })).allowed).toBe(true);
    const november = { period: '2027-11', periodStart: Date.parse('2027-11-01T00:00:00Z'), periodEnd: Date.parse('2027-12-01T00:00:00Z') };
    const mine = (await rows(limiter, '2027-11')).filter((row) => row.key === a || row.key === b);
    expect(mine).toEqual([
      { key: a, ...november, admitted: 3, refused: 3 },
      { key: b, ...november, admitted: 1, refused: 0 },
    ].sort((x, y) => x.key.localeCompare(y.key)));
    expect(limiter.ledger.stats()).toMatchObject({ counted: 4, repeated: 1, failed: 0 });
    // The next month is a new period; November is kept (keep: 2) and still exported then.
    await limiter.limit(a, MONTHLY, { now: NOV_2 + 30 * DAY });
    expect((await rows(limiter, '2027-12', { now: NOV_2 + 30 * DAY })).filter((row) => row.key === a)).toMatchObject([{ admitted: 1 }]);
    expect((await rows(limiter, '2027-11', { now: NOV_2 + 30 * DAY })).filter((row) => row.key === a)).toMatchObject([{ admitted: 3 }]);
    // Two months on, November's retention (itself and December) has ended: nothing is exported.
    expect(await rows(limiter, '2027-11', { now: Date.parse('2028-01-01T00:00:00Z') })).toEqual([]);
  });

  it('a request id is remembered up to ledger.ids per key and period: a retry of an older id is billed again', async () => {
    const limiter = createLimiterCore({ store: await topology.open(), deadlineMs: 10_000 });
    const policy: Policy = { algorithm: 'token-bucket', limit: 100, window: '1s', ledger: { period: 'day', ids: 3 } };
    const key = unique('ledger:ids');
    for (const id of ['r1', 'r2', 'r3', 'r4', 'r2', 'r1']) await limiter.limit(key, policy, { now: NOV_2, requestId: id });
    // r1..r4 billed (4); r2 is among the last 3 ids (repeated); r1 was forgotten when r4 came (billed again).
    expect((await rows(limiter, '2027-11-02')).filter((row) => row.key === key)).toMatchObject([{ admitted: 5, refused: 0 }]);
  });

  it('a ledger in a time zone bills by that zone’s calendar and is exported with it', async () => {
    const limiter = createLimiterCore({ store: await topology.open(), deadlineMs: 10_000 });
    const policy: Policy = { algorithm: 'fixed-window', limit: 10, window: 'day', timeZone: 'Asia/Tokyo', ledger: true };
    const key = unique('ledger:tokyo');
    // 16:00 UTC on the 1st is the 2nd in Tokyo (UTC+9).
    await limiter.limit(key, policy, { now: Date.parse('2027-11-01T16:00:00Z') });
    const [row] = (await rows(limiter, '2027-11-02', { timeZone: 'Asia/Tokyo' })).filter((r) => r.key === key);
    expect(row).toEqual({ key, period: '2027-11-02', periodStart: Date.parse('2027-11-01T15:00:00Z'), periodEnd: Date.parse('2027-11-02T15:00:00Z'), admitted: 1, refused: 0 });
    expect((await rows(limiter, '2027-11-02')).filter((r) => r.key === key)).toEqual([]);
  });

  it('a group (limitAll) records each limit with a ledger: admitted all together, or refused all together', async () => {
    const limiter = createLimiterCore({ store: await topology.open(), deadlineMs: 10_000 });
    const [user, org] = [unique('ledger:user'), unique('ledger:org')];
    const small: Policy = { algorithm: 'fixed-window', limit: 1, window: 'day', ledger: { refused: true } };
    const plain: Policy = { algorithm: 'fixed-window', limit: 10, window: 'day' };
    expect((await limiter.limitAll([{ key: user, policy: small }, { key: org, policy: plain }], { now: NOV_2, requestId: 'g1' })).every((d) => d.allowed)).toBe(true);
    expect((await limiter.limitAll([{ key: user, policy: small }, { key: org, policy: plain }], { now: NOV_2 })).some((d) => !d.allowed)).toBe(true);
    expect((await rows(limiter, '2027-11-02')).filter((r) => r.key === user || r.key === org)).toMatchObject([{ key: user, admitted: 1, refused: 1 }]);
  });
});

describe('the usage ledger at its bounds and on failure', () => {
  it('the memory store holds at most maxLedgerKeys keys per period: a new key past it is dropped and counted, the others stay exact', async () => {
    const limiter = createLimiterCore({ store: memoryStore({ sweepIntervalMs: 0, maxLedgerKeys: 2 }) });
    for (const key of ['k1', 'k2', 'k3', 'k1']) await limiter.limit(key, MONTHLY, { now: NOV_2 });
    expect(await rows(limiter, '2027-11')).toMatchObject([
      { key: 'k1', admitted: 2 },
      { key: 'k2', admitted: 1 },
    ]);
    expect(limiter.ledger.stats()).toMatchObject({ counted: 3, dropped: 1 });
  });

  it('a ledger write Redis fails after the decision loses that usage: the decision stands and stats().failed counts it', async () => {
    const store = await redis.open({ url: redis.single.url, keyPrefix: unique('broken') + ':' });
    const limiter = createLimiterCore({ store, deadlineMs: 10_000 });
    const client = new Redis(redis.single.url);
    try {
      const key = 'k';
      await limiter.limit(key, MONTHLY, { now: NOV_2 });
      // Another application's string where the shard's sums are: every write of that shard now fails.
      const [shardKey] = await client.keys('*{%L2027-11@UTC|*}c').then((keys) => keys.filter((k) => k.includes('broken')));
      await client.del(shardKey!);
      await client.set(shardKey!, 'not a hash');
      const decision = await limiter.limit(key, MONTHLY, { now: NOV_2 + 1 });
      expect(decision.allowed).toBe(true);
      expect(decision.remaining).toBe(3);
      expect(limiter.ledger.stats()).toMatchObject({ counted: 1, failed: 1 });
    } finally {
      client.disconnect();
    }
  });

  it('an export of 5,000 keys streams: its first row comes after one page of 500 is read, and the whole export reads each key once, page by page', async () => {
    const prefix = `${unique('pages')}:`;
    const store = await redis.open({ url: redis.single.url, keyPrefix: prefix });
    const limiter = createLimiterCore({ store, deadlineMs: 10_000 });
    const client = new Redis(redis.single.url);
    try {
      const policy: Policy = { algorithm: 'fixed-window', limit: 10, window: 'day', ledger: true };
      for (let i = 0; i < 5000; i += 50) await Promise.all(Array.from({ length: 50 }, (_, j) => limiter.limit(`user:${i + j}`, policy, { now: NOV_2 })));
      const pagesRead = async (): Promise<number> => Number(/cmdstat_zrangebylex:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0);
      const before = await pagesRead();
      const rows = limiter.ledger.export({ period: '2027-11-02', now: NOV_2 })[Symbol.asyncIterator]();
      expect((await rows.next()).done).toBe(false);
      // One page of one shard read so far: the rest of the period stays in Redis.
      expect((await pagesRead()) - before).toBe(1);
      const seen = new Set<string>();
      for (let next = await rows.next(); next.done !== true; next = await rows.next()) seen.add(next.value.key);
      expect(limiter.ledger.stats()).toMatchObject({ counted: 5000, failed: 0 });
      expect(seen.size + 1).toBe(5000);
      // 32 shards of about 156 keys: one page each, and one empty read when a page is full.
      expect((await pagesRead()) - before).toBeLessThanOrEqual(2 * 32);
    } finally {
      client.disconnect();
    }
  });

  it('a decision a failure mode made (the store did not answer) is not in the ledger: stats().unrecorded counts it', async () => {
    const store = redisStore({ url: `redis://127.0.0.1:${await freePort()}`, connectTimeoutMs: 200 });
    const limiter = createLimiterCore({ store, failureMode: 'open', heartbeatMs: false });
    try {
      const decision = await limiter.limit('k', MONTHLY, { now: NOV_2 });
      expect(decision).toMatchObject({ allowed: true, reason: 'fail-open' });
      expect(limiter.ledger.stats()).toMatchObject({ counted: 0, failed: 0, unrecorded: 1 });
    } finally {
      await limiter.close();
    }
  });

  it('a bad ledger option, request id or export period is a typed error that says what to write', async () => {
    const limiter = createLimiterCore({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const bad = (ledger: unknown) => limiter.limit('k', { algorithm: 'fixed-window', limit: 1, window: '1m', ledger } as Policy);
    await expect(bad({ keep: 0 })).rejects.toThrow(InvalidPolicyError);
    await expect(bad({ keep: 0 })).rejects.toThrow(/ledger\.keep must be a whole number from 1 to 1000/);
    await expect(bad({ period: 'fortnight' })).rejects.toThrow(/ledger\.period must be one of day, week, month, quarter, year/);
    await expect(bad({ timeZone: 'Mars/Olympus' })).rejects.toThrow(/ledger\.timeZone/);
    await expect(bad({ refused: 'yes' })).rejects.toThrow(/ledger\.refused must be true or false/);
    await expect(bad({ bill: true })).rejects.toThrow(/unknown ledger field "bill"/);
    await expect(bad('monthly')).rejects.toThrow(/ledger must be true or/);
    await expect(limiter.limit('k', MONTHLY, { requestId: '' })).rejects.toThrow(InvalidOptionError);
    await expect(limiter.limit('k', MONTHLY, { requestId: 'x'.repeat(201) })).rejects.toThrow(/requestId must be a string of 1 to 200 characters/);
    for (const period of ['2027-13', '2027-11-31', '2027-W54', '2027-Q5', '26-11', 'november', '']) {
      expect(() => limiter.ledger.export({ period }), period).toThrow(/is not a period; name a period as 2026/);
    }
    expect(() => limiter.ledger.export({ period: '2027-11', timeZone: 'nowhere' })).toThrow(/timeZone/);
  });
});
