/**
 * fixed-window's `windowStart: 'first-hit'` beyond the conformance vectors: with the store's own
 * time (process clock, Redis TIME) a fresh key gets a whole window; a first-hit and an aligned
 * window of one key keep separate counts (and separate Redis keys); the policy cache tells them apart.
 */
import { describe, expect, it } from 'vitest';
import { compilePolicy, createLimiter, memoryStore, type Policy } from '../../src/index.js';
import { storeTopologies, useRedisTopologies } from '../support/redis-topologies.js';

const NOW = 1_700_000_012_345;
const FIRST_HIT: Policy = { algorithm: 'fixed-window', limit: 2, window: '1m', windowStart: 'first-hit' };
const ALIGNED: Policy = { algorithm: 'fixed-window', limit: 2, window: '1m' };

const redis = useRedisTopologies();
const topologies = storeTopologies(redis);

function unique(name: string): string {
  return `${name}:${Math.random().toString(36).slice(2)}`;
}

describe.each(topologies)('first-hit windows on the $name', ({ open }) => {
  it('with the store\'s own time, a fresh key\'s window ends exactly one window after its first hit', async () => {
    const limiter = createLimiter({ store: await open() });
    const key = unique('fresh');
    const first = await limiter.limit(key, FIRST_HIT);
    expect(first.resetAt - first.now).toBe(60_000);
    const second = await limiter.limit(key, FIRST_HIT);
    expect(second.resetAt).toBe(first.resetAt);
    expect(second.remaining).toBe(0);
  });

  it('keeps a key\'s first-hit and aligned windows apart', async () => {
    const limiter = createLimiter({ store: await open() });
    const key = unique('apart');
    await limiter.limit(key, FIRST_HIT, { now: NOW });
    await limiter.limit(key, FIRST_HIT, { now: NOW });
    expect((await limiter.limit(key, FIRST_HIT, { now: NOW })).allowed).toBe(false);
    const aligned = await limiter.limit(key, ALIGNED, { now: NOW });
    expect(aligned).toMatchObject({ allowed: true, remaining: 1, resetAt: Math.ceil(NOW / 60_000) * 60_000 });
    await limiter.reset(key, ALIGNED);
    expect((await limiter.peek(key, FIRST_HIT, { now: NOW })).allowed).toBe(false);
  });
});

describe('first-hit policies', () => {
  it('are cached apart from aligned ones of the same content, and have their own state', () => {
    const first = compilePolicy(FIRST_HIT);
    const aligned = compilePolicy({ ...FIRST_HIT, windowStart: 'aligned' });
    expect(first.firstHit).toBe(true);
    expect(aligned.firstHit).toBe(false);
    expect(aligned.stateId).toBe(compilePolicy(ALIGNED).stateId);
    expect(first.stateId).not.toBe(aligned.stateId);
  });

  it('have Redis keys of their own (fh)', async () => {
    const store = await redis.open({ url: redis.single.url });
    expect(store.redisKey('user:42', compilePolicy(FIRST_HIT))).toBe('tollgate:{user:42}fh1m');
    expect(store.redisKey('user:42', compilePolicy(ALIGNED))).toBe('tollgate:{user:42}f1m');
  });

  it('through one limiter, an inline first-hit literal and an aligned one are never confused by the policy cache', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const first = await limiter.limit('k', { algorithm: 'fixed-window', limit: 2, window: '1m', windowStart: 'first-hit' }, { now: NOW });
    const aligned = await limiter.limit('k', { algorithm: 'fixed-window', limit: 2, window: '1m' }, { now: NOW });
    expect(first.resetAt).toBe(NOW + 60_000);
    expect(aligned.resetAt).toBe(Math.ceil(NOW / 60_000) * 60_000);
  });
});
