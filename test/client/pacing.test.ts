/**
 * Client-side pacing against Tollgate's middleware: with pacing on, a client sending more than its
 * limit waits its turn instead of meeting 429s (counted at the server), learning the policy from the
 * IETF fields or from `X-RateLimit-*` alone; concurrent callers queue; the host table stays bounded.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import type { HeaderStyle } from '../../src/http/index.js';
import type { Policy } from '../../src/policy.js';
import { ControlledTime, START, startFixedServer, startLimitedApp, type RecordingApp } from './support.js';

const apps: RecordingApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

/** Sends `count` GETs one after another through a client without retries; returns the server's record. */
async function sendInSequence(policy: Policy, headers: HeaderStyle, pacing: boolean, count: number): Promise<{ app: RecordingApp; time: ControlledTime }> {
  const time = new ControlledTime();
  const app = await startLimitedApp(policy, { headers, clock: time.now });
  apps.push(app);
  const client = createClient({ now: time.now, sleep: time.sleep, maxAttempts: 1, pacing, maxDelayMs: 600_000 });
  for (let i = 0; i < count; i++) await (await client.fetch(app.url)).arrayBuffer();
  return { app, time };
}

describe('pacing, one request after another', () => {
  // The longest the 20 requests may take: 15 past the first 5, at 5 a second, plus the holds at
  // remaining 0. A sliding window counter still weighs a full previous window when the next one
  // starts, so its quota is whole only 2 windows after a burst: 5 requests every 2 s.
  it.each<[string, Policy, HeaderStyle, number]>([
    ['token bucket, policy from the IETF fields', { algorithm: 'token-bucket', limit: 5, window: '1s' }, 'ietf', 4_500],
    ['fixed window, X-RateLimit-* only (no window given: remaining and reset)', { algorithm: 'fixed-window', limit: 5, window: '1s' }, 'legacy', 4_500],
    ['sliding window, both styles', { algorithm: 'sliding-window', limit: 5, window: '1s' }, 'both', 6_500],
    ['GCRA, policy from the IETF fields', { algorithm: 'gcra', limit: 5, window: '1s' }, 'ietf', 4_500],
  ])('%s: 20 requests over a limit of 5 per second meet no 429', async (_case, policy, headers, longestMs) => {
    const paced = await sendInSequence(policy, headers, true, 20);
    expect(paced.app.answered(429)).toBe(0);
    expect(paced.app.answered(200)).toBe(20);
    // It waited about as long as the limit requires (15 requests past the first 5, 5 a second), not much longer.
    const elapsed = paced.time.current - START;
    expect(elapsed).toBeGreaterThanOrEqual(2_000);
    expect(elapsed).toBeLessThanOrEqual(longestMs);
    // Without pacing the same traffic is mostly refused.
    const unpaced = await sendInSequence(policy, headers, false, 20);
    expect(unpaced.app.answered(429)).toBeGreaterThanOrEqual(10);
  });

  // A host that said Retry-After: 30 holds every request to it for 30 s, across calls; unless that
  // is past the call's maxDelayMs, when the request goes at once and the server decides.
  it.each([
    [600_000, [30_000]],
    [10_000, []],
  ])('a host that said Retry-After holds the next call (maxDelayMs %d: sleeps %j)', async (maxDelayMs, sleeps) => {
    const time = new ControlledTime();
    const app = await startFixedServer(429, { 'retry-after': '30' });
    apps.push(app);
    const client = createClient({ now: time.now, sleep: time.sleep, maxAttempts: 1, pacing: true, maxDelayMs });
    await client.fetch(app.url);
    await client.fetch(app.url);
    expect(time.sleeps).toEqual(sleeps);
    expect(app.arrivals).toHaveLength(2);
  });

  it('takes the window from pacing.windowMs when the server sends only a limit', async () => {
    const time = new ControlledTime();
    const app = await startFixedServer(200, { 'x-ratelimit-limit': '4' });
    apps.push(app);
    const client = createClient({ now: time.now, sleep: time.sleep, pacing: { windowMs: 1_000 } });
    for (let i = 0; i < 8; i++) await client.fetch(app.url);
    // The first response teaches 4 per second, with the whole quota left: 4 go at once, then one per 250 ms.
    expect(time.sleeps).toEqual([250, 250, 250]);
  });
});

describe('pacing and aborts', () => {
  it('gives back the turn of a call aborted while it waited: the next call waits no longer for it', async () => {
    const time = new ControlledTime();
    const app = await startFixedServer(200, { 'x-ratelimit-limit': '1' });
    apps.push(app);
    const controller = new AbortController();
    const sleep = async (ms: number, signal: AbortSignal | undefined): Promise<void> => {
      if (signal === controller.signal) controller.abort(); // the user gives up while this call waits
      return time.sleep(ms, signal);
    };
    const client = createClient({ now: time.now, sleep, pacing: { windowMs: 1_000 } });
    await client.fetch(app.url); // learns 1 per second, 1 left
    await client.fetch(app.url); // takes it
    await expect(client.fetch(app.url, { signal: controller.signal })).rejects.toMatchObject({ name: 'AbortError' });
    await client.fetch(app.url);
    // The aborted call's booking was given back: the last call waited one turn (1 s), not two.
    expect(time.sleeps).toEqual([1_000]);
    expect(app.arrivals).toHaveLength(3);
  });
});

describe('pacing, concurrent callers (real time)', () => {
  it('30 concurrent requests over a limit of 20 per second queue for their turn: (almost) no 429', async () => {
    const app = await startLimitedApp({ algorithm: 'token-bucket', limit: 20, window: '1s' }, { headers: 'both' });
    apps.push(app);
    const client = createClient({ maxAttempts: 1, pacing: true });
    await client.fetch(app.url); // learns the policy: 19 left
    const started = Date.now();
    const statuses = await Promise.all(Array.from({ length: 30 }, async () => (await client.fetch(app.url)).status));
    expect(statuses.filter((status) => status === 429).length).toBeLessThanOrEqual(2);
    // 19 at once, the other 11 as tokens come back; the hold at remaining 0 can add up to a second.
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect(Date.now() - started).toBeLessThan(5_000);
  }, 15_000);
});

describe('memory', () => {
  it('remembers at most maxHosts origins, the least recently used forgotten first', async () => {
    const servers = await Promise.all([0, 1, 2].map(() => startFixedServer(200, { 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': '4' })));
    apps.push(...servers);
    const client = createClient({ pacing: { maxHosts: 2 } });
    for (const server of servers) await client.fetch(server.url);
    expect(client.pacedHosts).toBe(2);
    const unpaced = createClient();
    await unpaced.fetch(servers[0]!.url);
    expect(unpaced.pacedHosts).toBe(0);
  });
});
