/**
 * A key's decisions never depend on another key's time: calls with explicit `now` on several keys,
 * each on its own timeline, get the same answers on the memory store as on a real Redis (whose
 * keys live in real time, docs/redis.md), however far apart the timelines are.
 */
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../src/algorithms/catalog.js';
import { createLimiter, memoryStore, redisStore, type Decision, type RedisStore, type Limiter, type Policy } from '../../src/index.js';
import { useRedisServer } from '../support/redis-topologies.js';

const T = 1_700_000_000_000;
const redis = useRedisServer();

/** One call of a replay: a key at its own `now`. */
type Call = readonly [key: string, now: number];

async function replay(limiter: Limiter, policy: Policy, calls: readonly Call[], run: string): Promise<Decision[]> {
  const decisions: Decision[] = [];
  for (const [key, now] of calls) decisions.push(await limiter.limit(`${run}:${key}`, policy, { now }));
  return decisions;
}

describe('mixed timelines on the memory store and on Redis', () => {
  it.each(ALGORITHMS)('%s: a key spent at T is still spent at T + 1 after another key is decided at T + 20 s', async (algorithm) => {
    const policy: Policy = { algorithm, limit: 3, window: '10s' };
    const calls: Call[] = [['a', T], ['a', T], ['a', T], ['b', T + 20_000], ['a', T + 1]];
    const run = `${algorithm}:${Math.random().toString(36).slice(2)}`;
    const memory = await replay(createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) }), policy, calls, run);
    const onRedis = await replay(createLimiter({ store: await openRedis(), deadlineMs: 5_000 }), policy, calls, run);
    expect(memory.map((d) => d.allowed)).toEqual([true, true, true, true, false]);
    expect(memory).toEqual(onRedis);
  });

  it('two interleaved replays a day apart, each key on its own timeline, answer as Redis does', async () => {
    const policy: Policy = { algorithm: 'fixed-window', limit: 5, window: '1m' };
    const calls: Call[] = [];
    // Key i lives on timeline T + i days; the calls alternate between timelines.
    for (let step = 0; step < 8; step++) for (let i = 0; i < 4; i++) calls.push([`k${i}`, T + i * 86_400_000 + step * 1_000]);
    const run = `interleaved:${Math.random().toString(36).slice(2)}`;
    // A store of 4 slots: every key is live, and each new key examines slots for expiry.
    const memory = await replay(createLimiter({ store: memoryStore({ maxKeys: 4, sweepIntervalMs: 0 }) }), policy, calls, run);
    const onRedis = await replay(createLimiter({ store: await openRedis(), deadlineMs: 5_000 }), policy, calls, run);
    expect(memory.filter((d) => d.allowed)).toHaveLength(4 * 5);
    expect(memory).toEqual(onRedis);
  });
});

/** The store the replays compare against; their limiters wait 5 s for it (the comparison is of answers, not of latency: a busy machine must not turn one into a failure-mode answer). */
async function openRedis(): Promise<RedisStore> {
  const store = redisStore({ url: redis.url });
  redis.stores.push(store);
  await store.ready();
  return store;
}
