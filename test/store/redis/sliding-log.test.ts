/**
 * The sliding log on Redis reads its LIST at the ends (src/store/redis/scripts/sliding-log.lua):
 * how many entries a decision reads, counted by Redis itself (`INFO commandstats` on a private
 * server), and a log in the layout earlier releases wrote read as is, with the memory store's
 * answers on the same history; what a settle of a reservation amid 20,000 entries reads and moves.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore, redisStore, type Decision, type Limiter, type Policy } from '../../../src/index.js';
import { useRedisWithClient } from '../../support/redis-topologies.js';

const redisAndClient = useRedisWithClient();
const server = redisAndClient.server;
const HOUR = 3_600_000;
const NOW = Date.now();
const POLICY: Policy = { algorithm: 'sliding-log', limit: 100_000, window: HOUR };
const ENTRIES = 20_000;
/** Entry i: logged at START + 150·i ms with cost 1 + (i mod 7); the last is 1 s before NOW. */
const START = NOW - 1_000 - 150 * (ENTRIES - 1);
const costOf = (i: number): number => 1 + (i % 7);
const LOGGED = Array.from({ length: ENTRIES }, (_, i) => costOf(i)).reduce((a, b) => a + b, 0);

/** Calls of each Redis command since the last reset, by name (lowercase). */
function commandCalls(): Record<string, number> {
  const stats = server.cli('INFO', 'commandstats');
  return Object.fromEntries([...stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
}

/** Reservations made in place of history entries: entry index → reservation id (its cost the entry's, ttl a day). */
type Reserved = ReadonlyMap<number, string>;
const DAY = 86_400_000;

/** The memory store after the same history: every entry admitted at its time (reserved, for those in `reserved`). */
async function memoryAfterHistory(key: string, reserved: Reserved = new Map()): Promise<Limiter> {
  const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
  for (let i = 0; i < ENTRIES; i++) {
    const [now, cost, id] = [START + 150 * i, costOf(i), reserved.get(i)];
    const decision = id === undefined ? await limiter.limit(key, POLICY, { now, cost }) : await limiter.reserve(key, POLICY, { now, cost, id, ttl: DAY });
    expect(decision.allowed).toBe(true);
  }
  return limiter;
}

/**
 * Writes the history straight into Redis as earlier releases laid it out: a LIST of "time
 * cumulative weight"; an entry in `reserved` is a reserve through `limiter` instead (the same entry).
 */
async function writeOldLayoutLog(limiter: Limiter, key: string, reserved: Reserved = new Map()): Promise<string> {
  await limiter.limit(`${key}:probe`, POLICY, { now: NOW });
  const [stateKey] = await redisAndClient.redis.keys(`*${key}:probe*`);
  const listKey = stateKey!.replace(`${key}:probe`, key);
  let cumulative = 0;
  let entries: string[] = [];
  const push = async (): Promise<void> => {
    for (let i = 0; i < entries.length; i += 5_000) await redisAndClient.redis.rpush(listKey, ...entries.slice(i, i + 5_000));
    entries = [];
  };
  for (let i = 0; i < ENTRIES; i++) {
    cumulative += costOf(i);
    const id = reserved.get(i);
    if (id === undefined) {
      entries.push(`${START + 150 * i} ${cumulative} ${costOf(i)}`);
      continue;
    }
    await push();
    expect((await limiter.reserve(key, POLICY, { now: START + 150 * i, cost: costOf(i), id, ttl: DAY })).allowed).toBe(true);
  }
  await push();
  await redisAndClient.redis.pexpire(listKey, 2 * HOUR);
  return listKey;
}

async function redisLimiter(): Promise<Limiter> {
  const store = redisStore({ url: server.url });
  server.stores.push(store);
  await store.ready();
  return createLimiter({ store, deadlineMs: 10_000 });
}

describe('sliding-log on Redis, a log of 20,000 entries', () => {
  it('guarantee: a sliding-log decision on Redis reads at most 2 log entries when admitted and O(log n) when denied or expiring, never the whole log', async () => {
    const onRedis = await redisLimiter();
    const key = 'scale';
    const listKey = await writeOldLayoutLog(onRedis, key);
    const inMemory = await memoryAfterHistory(key);
    const bound = 2 * Math.ceil(Math.log2(ENTRIES)) + 4;
    const steps: { readonly now: number; readonly cost: number; readonly reads: number; readonly allowed: boolean }[] = [
      { now: NOW, cost: 1, reads: 2, allowed: true },
      // Denied by a cost the remaining room cannot hold: the entry whose expiry frees enough is a bisection.
      { now: NOW + 1, cost: 100_000 - LOGGED + 5_000, reads: bound, allowed: false },
      { now: NOW + 2, cost: 100_000 - LOGGED - 1, reads: 2, allowed: true },
      // Full: a unit cost is denied, the oldest entry answers (no search).
      { now: NOW + 3, cost: 1, reads: 2, allowed: false },
      // An hour after the middle entry: half the log expired, found by a galloping search and trimmed.
      { now: START + 150 * (ENTRIES / 2) + HOUR, cost: 1, reads: bound, allowed: true },
      { now: START + 150 * (ENTRIES / 2) + HOUR + 1, cost: 1, reads: 2, allowed: true },
    ];
    for (const [index, step] of steps.entries()) {
      server.cli('CONFIG', 'RESETSTAT');
      const decision: Decision = await onRedis.limit(key, POLICY, { now: step.now, cost: step.cost });
      const calls = commandCalls();
      expect(decision, `step ${index}`).toEqual(await inMemory.limit(key, POLICY, { now: step.now, cost: step.cost }));
      expect(decision.allowed, `step ${index}`).toBe(step.allowed);
      expect(calls.lindex ?? 0, `step ${index}: LINDEX calls`).toBeLessThanOrEqual(step.reads);
      expect(calls.lrange ?? 0, `step ${index}: LRANGE calls`).toBe(0);
    }
    expect(await redisAndClient.redis.llen(listKey)).toBeLessThanOrEqual(ENTRIES / 2 + 6);
    await inMemory.close();
  }, 120_000);

  it('guarantee: a settle refunds amid 20,000 entries with O(log n) entries read and the shorter side moved in one LRANGE, one LTRIM and a push per 1,000 entries; every answer is the memory store\'s', async () => {
    const onRedis = await redisLimiter();
    const key = 'settle';
    // Near the oldest (2,000 older entries), nearer the newest (4,999 newer), the newest.
    const reserved: Reserved = new Map([[2_000, 'old'], [15_000, 'mid'], [ENTRIES - 1, 'new']]);
    await writeOldLayoutLog(onRedis, key, reserved);
    const inMemory = await memoryAfterHistory(key, reserved);
    const reads = Math.ceil(Math.log2(ENTRIES)) + 6;
    const steps = [
      { id: 'new', moved: 0 },
      { id: 'mid', moved: ENTRIES - 1 - 15_000 },
      { id: 'old', moved: 2_000 },
    ];
    for (const [index, step] of steps.entries()) {
      const now = NOW + index;
      server.cli('CONFIG', 'RESETSTAT');
      const settled = await onRedis.settle(key, POLICY, { id: step.id, cost: 0, now });
      const calls = commandCalls();
      expect(settled, step.id).toEqual(await inMemory.settle(key, POLICY, { id: step.id, cost: 0, now }));
      expect(settled.status, step.id).toBe('settled');
      expect(calls.lindex ?? 0, `${step.id}: LINDEX calls`).toBeLessThanOrEqual(reads);
      expect(calls.lrange ?? 0, `${step.id}: LRANGE calls`).toBe(step.moved > 0 ? 1 : 0);
      expect(calls.ltrim ?? 0, `${step.id}: LTRIM calls`).toBe(step.moved > 0 ? 1 : 0);
      expect((calls.lpush ?? 0) + (calls.rpush ?? 0), `${step.id}: pushes`).toBe(Math.ceil(step.moved / 1_000));
    }
    // Each gave back its entry's whole cost.
    expect((await onRedis.settle(key, POLICY, { id: 'old', cost: 0, now: NOW + 3 })).decision.remaining).toBe(100_000 - LOGGED + costOf(2_000) + costOf(15_000) + costOf(ENTRIES - 1));
    // The totals after it, as the refunded entries expire one by one: the memory store's.
    for (const later of [NOW + 10, START + 150 * 2_000 + HOUR, START + 150 * 15_000 + HOUR + 1, NOW + HOUR]) {
      expect(await onRedis.limit(key, POLICY, { now: later, cost: 1 }), `at ${later}`).toEqual(await inMemory.limit(key, POLICY, { now: later, cost: 1 }));
    }
    await inMemory.close();
  }, 120_000);

  it('guarantee: a sliding-log key written by an earlier release (a LIST of "time cumulative weight") is read as is after an upgrade: no decision differs from the memory store fed the same history, so nothing is over-admitted', async () => {
    const onRedis = await redisLimiter();
    const key = 'upgrade';
    await writeOldLayoutLog(onRedis, key);
    const inMemory = await memoryAfterHistory(key);
    let admitted = 0;
    // Costs 1..9000 at times across the whole hour: admissions, denials, expiry of part of the log.
    for (let step = 0; step < 200; step++) {
      const now = NOW + step * 18_000 + (step % 3);
      const cost = 1 + ((step * 7919) % 9_000);
      const decision = await onRedis.limit(key, POLICY, { now, cost });
      expect(decision, `step ${step}`).toEqual(await inMemory.limit(key, POLICY, { now, cost }));
      if (decision.allowed) admitted += 1;
    }
    expect(admitted).toBeGreaterThan(10);
    expect(admitted).toBeLessThan(190);
    await inMemory.close();
  }, 120_000);

  it('with countRejected and costs 1 to 9, a full log dropping its oldest entries answers as the memory store, call by call', async () => {
    const onRedis = await redisLimiter();
    const inMemory = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const policy: Policy = { algorithm: 'sliding-log', limit: 40, window: 10_000, countRejected: true };
    let now = NOW;
    let denied = 0;
    for (let step = 0; step < 400; step++) {
      now += (step * 7) % 5 === 0 ? 0 : (step * 131) % 97;
      const cost = 1 + ((step * 13) % 9);
      const decision = await onRedis.limit('rejected', policy, { now, cost });
      expect(decision, `step ${step}`).toEqual(await inMemory.limit('rejected', policy, { now, cost }));
      if (!decision.allowed) denied += 1;
    }
    expect(denied).toBeGreaterThan(100);
    await inMemory.close();
  });

  it('a consume that only finds expired entries drops them, as the memory store does (a later call with an earlier clock then agrees)', async () => {
    const onRedis = await redisLimiter();
    const inMemory = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const policy: Policy = { algorithm: 'sliding-log', limit: 1, window: 1 };
    // The clock-going-back property's counterexample: admitted at t, a cost above the limit at
    // t + 1 (expires the entry), then a call at t again.
    for (const [now, cost] of [[NOW, 1], [NOW + 1, 2], [NOW, 1]] as const) {
      expect(await onRedis.limit('expired-only', policy, { now, cost })).toEqual(await inMemory.limit('expired-only', policy, { now, cost }));
    }
    await inMemory.close();
  });
});
