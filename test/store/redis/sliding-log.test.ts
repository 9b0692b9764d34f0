/**
 * The sliding log on Redis reads its LIST at the ends (src/store/redis/scripts/sliding-log.lua):
 * how many entries a decision reads, counted by Redis itself (`INFO commandstats` on a private
 * server), and a log in the layout earlier releases wrote read as is, with the memory store's
 * answers on the same history.
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

/** The memory store after the same history: every entry admitted at its time. */
async function memoryAfterHistory(key: string): Promise<Limiter> {
  const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
  for (let i = 0; i < ENTRIES; i++) {
    const decision = await limiter.limit(key, POLICY, { now: START + 150 * i, cost: costOf(i) });
    expect(decision.allowed).toBe(true);
  }
  return limiter;
}

/** Writes the history straight into Redis as earlier releases laid it out: a LIST of "time cumulative weight". */
async function writeOldLayoutLog(limiter: Limiter, key: string): Promise<string> {
  await limiter.limit(`${key}:probe`, POLICY, { now: NOW });
  const [stateKey] = await redisAndClient.redis.keys(`*${key}:probe*`);
  const listKey = stateKey!.replace(`${key}:probe`, key);
  let cumulative = 0;
  const entries: string[] = [];
  for (let i = 0; i < ENTRIES; i++) {
    cumulative += costOf(i);
    entries.push(`${START + 150 * i} ${cumulative} ${costOf(i)}`);
  }
  for (let i = 0; i < ENTRIES; i += 5_000) await redisAndClient.redis.rpush(listKey, ...entries.slice(i, i + 5_000));
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
