/**
 * The `local` failure mode on nodes that count each other: three limiters, each with its own Redis
 * store (its own connection), mark themselves alive on one real redis-server every 100 ms. Paused
 * (SIGSTOP), Redis answers nothing and each node enforces ⌈limit / the nodes it last saw⌉, so the
 * three admit the limit between them, where with the default `expectedNodes: 1` they admitted three
 * times it. A node that leaves drops out of the count; `expectedNodes` is a floor.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidOptionError, createLimiter, redisStore, type Limiter, type Policy } from '../../../src/index.js';
import { useRedisServer } from '../../support/redis-topologies.js';

const LIMIT = 30;
const HOURLY: Policy = { algorithm: 'fixed-window', limit: LIMIT, window: '1h' };
const HEARTBEAT_MS = 100;
const redis = useRedisServer();
const limiters: Limiter[] = [];

afterEach(async () => {
  await Promise.all(limiters.splice(0).map((limiter) => limiter.close()));
});

async function node(options: { expectedNodes?: number; heartbeatMs?: number | false } = {}): Promise<Limiter> {
  const store = redisStore({ url: redis.url, commandTimeoutMs: 1_000 });
  await store.ready();
  const limiter = createLimiter({ store, deadlineMs: 50, heartbeatMs: HEARTBEAT_MS, ...options });
  limiters.push(limiter);
  return limiter;
}

const liveNodes = (nodes: readonly Limiter[]) => nodes.map((limiter) => limiter.health().liveNodes);

/**
 * What each node admits of `calls` calls on `key` while Redis is paused (none reaches it), once the
 * nodes last counted are `counted`: Redis is paused in the same turn, so no later count comes in.
 */
async function admittedDuringOutage(nodes: readonly Limiter[], counted: readonly (number | undefined)[], key: string, calls: number): Promise<number[]> {
  await expect.poll(() => liveNodes(nodes), { timeout: 5_000, interval: 10 }).toEqual(counted);
  process.kill(redis.pid, 'SIGSTOP');
  try {
    return await Promise.all(
      nodes.map(async (limiter) => {
        const decisions = await Promise.all(Array.from({ length: calls }, () => limiter.limit(key, HOURLY)));
        expect(decisions.every((decision) => decision.reason === 'local-fallback')).toBe(true);
        return decisions.filter((decision) => decision.allowed).length;
      }),
    );
  } finally {
    process.kill(redis.pid, 'SIGCONT');
  }
}

const sum = (counts: readonly number[]) => counts.reduce((total, count) => total + count, 0);
const unique = (name: string): string => `${name}-${Math.random().toString(36).slice(2)}`;

describe('the local failure mode divides each limit by the nodes seen alive', () => {
  it('3 nodes during a Redis outage admit at most the limit between them (not 3 × the limit)', async () => {
    const nodes = await Promise.all([node(), node(), node()]);
    const admitted = await admittedDuringOutage(nodes, [3, 3, 3], unique('three'), LIMIT);
    console.log(`live-nodes: 3 nodes, limit ${LIMIT}, admitted during the outage ${admitted.join(' + ')} = ${sum(admitted)}`);
    expect(admitted).toEqual([10, 10, 10]);
    expect(sum(admitted)).toBeLessThanOrEqual(LIMIT);

    // A node that leaves stops marking itself alive: after 3 heartbeats the other two divide by 2.
    const leaving = nodes[2]!;
    limiters.splice(limiters.indexOf(leaving), 1);
    await leaving.close();
    expect(await admittedDuringOutage(nodes.slice(0, 2), [2, 2], unique('two'), LIMIT)).toEqual([15, 15]);
  }, 20_000);

  it('expectedNodes is a floor: a node divides by it while fewer nodes are seen', async () => {
    const nodes = await Promise.all([node({ expectedNodes: 3 }), node()]);
    // ⌈30 / 3⌉ on the node that expects 3, ⌈30 / 2⌉ on the other.
    expect(await admittedDuringOutage(nodes, [2, 2], unique('floor'), LIMIT)).toEqual([10, 15]);
  }, 20_000);

  it.each([5, 60_001, 1.5, '2s', true])('heartbeatMs %j is refused, naming the range', (heartbeatMs) => {
    expect(() => createLimiter({ heartbeatMs: heartbeatMs as number })).toThrow(InvalidOptionError);
    expect(() => createLimiter({ heartbeatMs: heartbeatMs as number })).toThrow(/^createLimiter: heartbeatMs must be a whole number of ms from 10 to 60000 \(or false: no heartbeat\), got /);
  });

  it('heartbeatMs: false counts no nodes: expectedNodes alone', async () => {
    const nodes = await Promise.all([node({ heartbeatMs: false }), node()]);
    expect(await admittedDuringOutage(nodes, [undefined, 1], unique('off'), LIMIT)).toEqual([LIMIT, LIMIT]);
  }, 20_000);
});
