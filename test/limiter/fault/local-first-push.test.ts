/**
 * Local-first and a store that stalls (SIGSTOP) while a push is out (docs/scaling.md, "A push that
 * failed"): the push times out, reaches Redis anyway once it resumes, and is sent again with the
 * next sync, so those units are counted twice: the node admits fewer afterwards, never more. On a
 * controlled clock (explicit `now`); only the deadline runs in real time.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, type Policy } from '../../../src/index.js';
import { liveStore, useRedisServer, whileStalled } from '../../support/redis-topologies.js';

const redis = useRedisServer();
const T0 = 1_700_000_000_000;
const LIMIT = 20;
const POLICY: Policy = { algorithm: 'fixed-window', limit: LIMIT, window: '1h' };
const SYNC_MS = 100;

describe('local-first: a push that timed out but reached Redis', () => {
  it('is counted twice: fewer admitted afterwards, never more', async () => {
    // A deadline of 1 s, not 50 ms: the stalled push must time out, and no call after it may (a
    // busy machine can take 50 ms over a call; the \`local\` failure mode would then admit it).
    const limiter = createLimiter({ store: await liveStore(redis), deadlineMs: 1_000, breaker: false });
    const exact = createLimiter({ store: await liveStore(redis), deadlineMs: 5_000 });
    const key = `pushed-twice-${Math.random().toString(36).slice(2)}`;
    let admitted = 0;
    const call = async (at: number): Promise<void> => {
      if ((await limiter.limit(key, POLICY, { now: T0 + at, syncIntervalMs: SYNC_MS })).allowed) admitted += 1;
    };
    // A cold key: the store decides the first call and sends a view with it; 4 more on the view.
    for (let i = 0; i < 5; i++) await call(0);
    expect(limiter.localFirstStats()).toMatchObject({ local: 4, syncFailures: 0 });
    // One interval on, a decision sends the 5 units not sent yet: Redis is stalled, the push times out…
    await whileStalled(redis, async () => {
      await call(SYNC_MS);
      expect(limiter.localFirstStats()).toMatchObject({ syncs: 2, syncsOut: 1, syncFailures: 0 });
      await expect.poll(() => limiter.localFirstStats()!.syncFailures, { timeout: 5_000, interval: 10 }).toBe(1);
      expect(limiter.localFirstStats()!.syncsOut).toBe(0);
    });
    // …and Redis runs it once it resumes; the next sync sends the same 5 again, with one more.
    await call(2 * SYNC_MS);
    expect(admitted).toBe(7);
    // Until that sync is answered the node decides on its older view: wait for the node's answer,
    // not for Redis's count (Redis may write another client's reply first).
    await expect.poll(() => limiter.localFirstStats()!.syncsOut, { timeout: 5_000, interval: 5 }).toBe(0);
    expect(limiter.localFirstStats()).toMatchObject({ syncs: 3, syncFailures: 1 });
    expect((await exact.peek(key, POLICY, { now: T0 + 2 * SYNC_MS })).remaining).toBe(LIMIT - (7 + 5) - 1);
    // From the view it got back (12 where 7 were admitted) the node admits 8 more, not 13.
    for (let i = 0; i < 20; i++) await call(2 * SYNC_MS + 1 + i);
    expect(admitted).toBe(LIMIT - 5);
    await limiter.close();
    expect((await exact.peek(key, POLICY, { now: T0 + 3 * SYNC_MS })).allowed).toBe(false);
  });
});
