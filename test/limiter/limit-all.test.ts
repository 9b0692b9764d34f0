/**
 * A multi-limit decision that one limit denies counts nothing under the others, so their decisions
 * report what actually remains (not what would have remained had the request been admitted); a
 * denied `countRejected` fixed window is still counted, past its limit. On memory, a single Redis
 * and a Redis Cluster with the limits in different slots (decided by peeks, then consumes).
 */
import { describe, expect, it } from 'vitest';
import { createLimiterCore, type LimiterCore } from '../../src/limiter/core.js';
import { memoryStore } from '../../src/store/memory.js';
import { useRedisTopologies } from '../support/redis-topologies.js';

const NOW = 1_700_000_040_000; // a whole minute
const roomy = { algorithm: 'token-bucket', limit: 10, window: '1m' } as const;
const tight = { algorithm: 'fixed-window', limit: 2, window: '1m' } as const;
const quota = { algorithm: 'fixed-window', limit: 1, window: '1m', countRejected: true } as const;

const topologies = useRedisTopologies();

describe.each(['memory', 'redis', 'cluster'] as const)('limitAll on %s', (where) => {
  const open = async (): Promise<LimiterCore> => {
    if (where === 'memory') return createLimiterCore({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const store = where === 'redis' ? await topologies.open({ url: topologies.single.url }) : await topologies.open({ cluster: topologies.cluster.nodes });
    // What the store answers, not how fast: under load a peek past the 50 ms default deadline was
    // answered by the failure mode (open), and the group then spent the roomy limit (7, not 9).
    return createLimiterCore({ store, deadlineMs: 5_000, failureMode: 'throw' });
  };
  const id = (name: string) => `${name}:${where}:${Math.random().toString(36).slice(2)}`;

  it('a denied request: the admitted limits report what actually remains, and nothing was spent', async () => {
    const limiter = await open();
    const [a, b] = [id('roomy'), id('tight')];
    const both = (cost: number) => limiter.limitAll([{ key: a, policy: roomy, cost }, { key: b, policy: tight, cost }], { now: NOW });
    expect((await both(1)).map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 9],
      [true, 1],
    ]);
    const denied = await both(2);
    expect(denied.map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 9], // not 7: the denied request took nothing
      [false, 1],
    ]);
    expect((await both(1)).map((d) => d.remaining)).toEqual([8, 0]);
  });

  it('a denied countRejected fixed window is counted past its limit even when the group is denied', async () => {
    const limiter = await open();
    const [a, q] = [id('roomy'), id('quota')];
    const both = () => limiter.limitAll([{ key: a, policy: roomy }, { key: q, policy: quota }], { now: NOW });
    expect((await both()).every((d) => d.allowed)).toBe(true);
    expect((await both()).map((d) => d.allowed)).toEqual([true, false]);
    expect((await both()).map((d) => d.allowed)).toEqual([true, false]);
    // Overdrawn: a probe (a look of cost 0 whose denial stands) is denied; a look is not.
    expect((await limiter.decide(q, quota, { now: NOW + 1 }, 'probe')).allowed).toBe(false);
    expect((await limiter.look(q, quota, { now: NOW + 1 })).allowed).toBe(true);
    // The roomy limit was spent once, by the one admitted request.
    expect((await limiter.look(a, roomy, { now: NOW })).remaining).toBe(9);
    // The next window starts clean.
    expect((await limiter.decide(q, quota, { now: NOW + 60_000 }, 'probe')).allowed).toBe(true);
  });
});
