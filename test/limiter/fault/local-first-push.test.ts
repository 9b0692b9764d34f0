/**
 * Local-first and a store that stalls (SIGSTOP) while a push is out (docs/scaling.md, "A push that
 * failed"): the push times out, reaches Redis anyway once it resumes, and is sent again with the
 * next sync, so those units are counted twice: the node admits fewer afterwards, never more. On a
 * controlled clock (explicit `now`); only the deadline runs in real time.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLimiter, type Policy } from '../../../src/index.js';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService } from '../../../src/service/server.js';
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

describe('the service counts a local-first sync once it has an answer', () => {
  it('tollgate_local_first_syncs_total: a sync still out is neither ok nor failed; once timed out, failed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-sync-metric-'));
    // Syncs every second: the second request, a second on, is decided on the view and sends one.
    writeFileSync(join(dir, 'api.yaml'), 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 30, sync_interval_ms: 1000 }\n');
    const service = await startService(
      resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: dir, redis: redis.url, 'log-level': 'silent', host: '127.0.0.1', 'drain-delay': '0', 'deadline-ms': '1000' }, {}),
    );
    const body = JSON.stringify({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value: `sync-metric-${Math.random().toString(36).slice(2)}` }] }] });
    const check = async (): Promise<number> => (await fetch(`http://127.0.0.1:${service.httpPort!}/json`, { method: 'POST', body })).status;
    const syncs = async (): Promise<{ ok: number; failed: number; local: number }> => {
      const metrics = await (await fetch(`http://127.0.0.1:${service.adminPort}/metrics`)).text();
      const value = (pattern: string): number => Number(new RegExp(`^${pattern} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0);
      return { ok: value('tollgate_local_first_syncs_total\\{result="ok"\\}'), failed: value('tollgate_local_first_syncs_total\\{result="failed"\\}'), local: value('tollgate_local_first_decisions_total') };
    };
    try {
      // The store decides the first request and a sync fetches the view; then one is decided on it.
      // After the rules watcher's first look at the files (its 500 ms settle delay): it compiles the
      // same files anew once, and a new policy object starts a new view.
      expect(await check()).toBe(200);
      await expect.poll(async () => (await syncs()).ok, { timeout: 5_000, interval: 20 }).toBeGreaterThanOrEqual(1);
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      await expect.poll(async () => (await check(), (await syncs()).local), { timeout: 5_000, interval: 20 }).toBeGreaterThanOrEqual(1);
      const before = await syncs();
      expect(before.ok).toBeGreaterThanOrEqual(1);
      expect(before.failed).toBe(0);
      await new Promise((resolve) => setTimeout(resolve, 1_050)); // one sync interval, in the service's own clock
      await whileStalled(redis, async () => {
        // Decided on the view, answered at once; its sync goes to a stalled Redis.
        expect(await check()).toBe(200);
        const out = await syncs();
        expect(out.local).toBe(before.local + 1);
        expect([out.ok, out.failed]).toEqual([before.ok, 0]);
        // The sync times out at the 1 s deadline: failed, and still not ok.
        await expect.poll(async () => (await syncs()).failed, { timeout: 10_000, interval: 50 }).toBe(1);
        expect((await syncs()).ok).toBe(before.ok);
      });
    } finally {
      await service.close();
    }
  }, 30_000);
});
