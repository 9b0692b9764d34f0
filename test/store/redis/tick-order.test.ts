/**
 * One tick's requests on the Redis store (src/store/redis/tick.ts), on one Redis and on a Cluster:
 * the calls of a tick for one key are applied in the order they were made, whatever the `now`s the
 * tick holds. Grouped by `now` alone, a request whose `now` first came earlier in the tick (another
 * key's) went before requests for its key made before it.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, type Limiter, type Policy } from '../../../src/index.js';
import { storeTopologies, useRedisTopologies } from '../../support/redis-topologies.js';

const redis = useRedisTopologies();
const T0 = 1_800_000_000_000;
const run = Math.random().toString(36).slice(2, 8);

describe.each(storeTopologies(redis))('one tick, several `now`s ($name)', ({ name, open }) => {
  const limiterOn = async (): Promise<Limiter> => createLimiter({ store: await open(), failureMode: 'throw', breaker: false, deadlineMs: 20_000 });
  const keyOf = (label: string): string => `${run}:${name}:${label}`;

  it('a key\'s calls at T0 then T0 + 1 are applied in that order when another key\'s call at T0 + 1 came first (limit 2: the third is denied, not the first)', async () => {
    const limiter = await limiterOn();
    const policy: Policy = { algorithm: 'fixed-window', limit: 2, window: '1h' };
    const [other, key] = [keyOf('other'), keyOf('key')];
    const calls = [[other, T0 + 1], [key, T0], [key, T0 + 1], [key, T0 + 1]] as const;
    const decisions = await Promise.all(calls.map(([k, now]) => limiter.limit(k, policy, { now })));
    expect(decisions.map((decision) => decision.allowed)).toEqual([true, true, true, false]);
  });

  it('local-first, one limiter, two keys: a stale view\'s unsent unit is counted before the store decides, though the other key\'s decision came first in the tick (10 admitted, not 11)', async () => {
    const limiter = await limiterOn();
    const policy: Policy = { algorithm: 'fixed-window', limit: 10, window: 1_000 };
    const [a, b] = [keyOf('a'), keyOf('b')];
    let admitted = 0;
    // [ms after T0, keys decided at once]: at T0 + 601 both views are stale, a's holding the unit admitted at T0 + 1.
    for (const [at, keys] of [[0, [a, b]], [1, [a]], [601, [b, a]], [602, Array<string>(12).fill(a)]] as const) {
      const decisions = await Promise.all(keys.map((key) => limiter.limit(key, policy, { now: T0 + at, syncIntervalMs: 200 })));
      admitted += decisions.filter((decision, index) => keys[index] === a && decision.allowed).length;
      // Every sync answered before the next step.
      while (limiter.health().inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 1));
    }
    // Closed here: its views' timer would push their last units during the next test.
    await limiter.close();
    expect(admitted).toBe(10);
  });
});
