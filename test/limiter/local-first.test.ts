/**
 * Local-first mode: each node decides on its view of the shared window counter and syncs with
 * the store every `syncIntervalMs`. Measured against the exact mode on the same bursty trace, with
 * the over-admission bound derived in docs/scaling.md: (N − 1) × what one node admits in the span
 * of a view's age. On a shared memory store with a controlled clock (syncs answered at once, so
 * the figures are exact and repeatable), then on a real Redis in real time.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { InvalidOptionError, RulesError, compilePolicy, createLimiter, memoryStore, redisStore, type Limiter, type Policy } from '../../src/index.js';
import { compileRules, parseRules } from '../../src/rules/index.js';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService } from '../../src/service/server.js';
import { startApp } from '../support/http-apps.js';
import { useRedisServer } from '../support/redis-topologies.js';
import { burstyTrace } from '../support/traces.js';

const redis = useRedisServer();
const { stores } = redis;
const opened: Limiter[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((limiter) => limiter.close()));
});

const T0 = 1_700_000_000_000;
const unique = (name: string): string => `${name}-${Math.random().toString(36).slice(2)}`;
const scriptCalls = (): number => Number(/cmdstat_evalsha:calls=(\d+)/.exec(redis.cli('INFO', 'commandstats'))?.[1] ?? 0);

/** A limiter on its own Redis connection: one "node". */
async function redisNode(): Promise<Limiter> {
  const store = redisStore({ url: redis.url });
  stores.push(store);
  await store.ready();
  return createLimiter({ store, deadlineMs: 5_000 });
}


/**
 * The derived bound: a node's view misses what the others admitted since its last answered sync,
 * at most `span` ms ago; so the nodes together pass the limit by at most (N − 1) × the most
 * requests one node receives in any span of that length.
 */
function overAdmissionBound(trace: readonly { at: number; node: number }[], span: number, nodes = 3): number {
  let most = 0;
  for (let node = 0; node < nodes; node++) {
    const times = trace.filter((event) => event.node === node).map((event) => event.at);
    let first = 0;
    for (let last = 0; last < times.length; last++) {
      while (times[last]! - times[first]! > span) first += 1;
      most = Math.max(most, last - first + 1);
    }
  }
  return (nodes - 1) * most;
}

describe('local-first, three nodes on one memory store, controlled clock', () => {
  it.each([
    ['fixed-window', 50],
    ['fixed-window', 250],
    ['fixed-window', 1_000],
    ['sliding-window', 50],
    ['sliding-window', 250],
    ['sliding-window', 1_000],
  ] as const)('%s, sync every %d ms: over-admission on a bursty trace within the bound; far fewer store calls', async (algorithm, syncMs) => {
    const store = memoryStore();
    const nodes = [0, 1, 2].map(() => createLimiter({ store }));
    opened.push(...nodes);
    const policy: Policy = { algorithm, limit: 300, window: '1h' };
    const trace = burstyTrace(600, 11);
    let exact = 0;
    let local = 0;
    let instant = -1;
    for (const { at, node } of trace) {
      // Between two instants of the trace the event loop turns: the syncs sent go out and (on this
      // synchronous store) are answered, as a store round trip well inside a pause would be.
      if (at !== instant) await new Promise((resolve) => setImmediate(resolve));
      instant = at;
      if ((await nodes[node]!.limit('exact', policy, { now: T0 + at })).allowed) exact += 1;
      if ((await nodes[node]!.limit('local', policy, { now: T0 + at, syncIntervalMs: syncMs })).allowed) local += 1;
    }
    const bound = overAdmissionBound(trace, syncMs);
    const syncs = nodes.reduce((sum, node) => sum + (node.localFirstStats()?.syncs ?? 0), 0);
    const decidedLocally = nodes.reduce((sum, node) => sum + (node.localFirstStats()?.local ?? 0), 0);
    console.log(`[local-first] memory, ${algorithm}, 3 nodes, limit 300/h, 600 bursty requests, sync ${syncMs} ms: admitted ${local} vs exact ${exact} (over ${local - exact}, bound ${bound}); ${decidedLocally} decided locally, ${syncs} syncs`);
    expect(exact).toBe(300);
    expect(local).toBeGreaterThanOrEqual(exact);
    expect(local - exact).toBeLessThanOrEqual(bound);
    expect(decidedLocally).toBeGreaterThan(trace.length * 0.9);
    // Every admitted unit reached the store: after a flush, the shared counter holds them all.
    await Promise.all(nodes.map((node) => node.close()));
    expect(store.addToWindow('local', compilePolicy(policy), 0, T0 + trace.at(-1)!.at).state[0]).toBe(local);
  });

  it('one node alone admits exactly the limit, remaining counting down as in the exact mode, and crosses windows', async () => {
    const limiter = createLimiter();
    opened.push(limiter);
    for (const algorithm of ['fixed-window', 'sliding-window'] as const) {
      const policy: Policy = { algorithm, limit: 10, window: 1_000 };
      for (let i = 0; i < 40; i++) {
        const now = T0 + i * 100;
        await new Promise((resolve) => setImmediate(resolve));
        const local = await limiter.limit(`a-${algorithm}`, policy, { now, syncIntervalMs: 50 });
        const exact = await limiter.limit(`b-${algorithm}`, policy, { now });
        expect(local).toEqual(exact);
      }
    }
  });

  it('counts denied hits too under countRejected (envoy counting), so the window stays overdrawn on every node', async () => {
    const store = memoryStore();
    const [a, b] = [createLimiter({ store }), createLimiter({ store })];
    opened.push(a, b);
    const policy: Policy = { algorithm: 'fixed-window', limit: 5, window: '1h', countRejected: true };
    for (let i = 0; i < 12; i++) await a.limit('k', policy, { now: T0 + i * 100, syncIntervalMs: 50 });
    await a.close();
    const seen = await b.peek('k', policy, { now: T0 + 2_000, cost: 1 });
    expect(seen.allowed).toBe(false);
    expect((await b.look('k', policy, { now: T0 + 2_000 })).remaining).toBe(0);
  });
  it('one node never over-admits: a stale view\'s unsent units reach the store before it decides', async () => {
    // The view goes stale (3 sync intervals without an answered sync: a busy machine) while it holds
    // units admitted here and not sent yet; the store then decides. Before: it decided without them,
    // so one node alone passed its own limit (tollgate serve, 39 of 30 under load).
    const limiter = createLimiter({ store: memoryStore() });
    opened.push(limiter);
    const policy: Policy = { algorithm: 'fixed-window', limit: 30, window: '1h' };
    const syncIntervalMs = 60_000; // the process's quiet-view timer never fires during the test
    const admitted: boolean[] = [];
    admitted.push((await limiter.limit('k', policy, { now: T0, syncIntervalMs })).allowed);
    for (let i = 1; i < 30; i++) admitted.push((await limiter.limit('k', policy, { now: T0 + 1_000, syncIntervalMs })).allowed);
    // 29 units admitted on the view since its last sync, none sent (the interval has not passed).
    const stale = T0 + 1_000 + 4 * syncIntervalMs;
    for (let i = 0; i < 5; i++) admitted.push((await limiter.limit('k', policy, { now: stale, syncIntervalMs })).allowed);
    expect(admitted.filter(Boolean)).toHaveLength(30);
    expect((await limiter.look('k', policy, { now: stale })).remaining).toBe(0);
  });

  it('one node never over-admits: units the quiet-view timer took for the end of the tick reach the store before a decision made meanwhile', async () => {
    // The timer (every syncIntervalMs) takes a quiet view's units into the syncs sent at the end of
    // the tick (setImmediate). A store decision made before then, for a stale view, went first and
    // did not count them: one limiter passed its limit (the model, one Redis, 10 of 8 under load).
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'setImmediate', 'clearImmediate'] });
    try {
      let clock = 0;
      const limiter = createLimiter({ store: memoryStore(), clock: () => clock });
      opened.push(limiter);
      const policy: Policy = { algorithm: 'fixed-window', limit: 4, window: '1h' };
      const syncIntervalMs = 50;
      const admitted: boolean[] = [];
      admitted.push((await limiter.limit('k', policy, { now: T0, syncIntervalMs })).allowed);
      for (let i = 0; i < 3; i++) admitted.push((await limiter.limit('k', policy, { now: T0 + 1, syncIntervalMs })).allowed);
      // 3 units on the view, not sent; the view goes quiet and the timer takes them for the tick's syncs.
      clock += syncIntervalMs;
      vi.advanceTimersByTime(syncIntervalMs);
      // Before the end of the tick, a request the store decides (the view is stale by then).
      const late = limiter.limit('k', policy, { now: T0 + 1 + 4 * syncIntervalMs, syncIntervalMs });
      vi.runAllTicks();
      vi.advanceTimersByTime(0);
      admitted.push((await late).allowed);
      expect(admitted).toEqual([true, true, true, true, false]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('holds at most 100,000 views per limiter: the oldest goes first, its unsent units pushed', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    opened.push(limiter);
    const policy: Policy = { algorithm: 'fixed-window', limit: 10, window: '1h' };
    const options = { now: T0, syncIntervalMs: 60_000 }; // no sync but the ones a new view makes
    // The oldest view: the store decided 1, the view 2 more, not sent.
    for (let i = 0; i < 3; i++) await limiter.limit('oldest', policy, options);
    expect((await limiter.look('oldest', policy, options)).remaining).toBe(9);
    for (let i = 0; i < 100_000; i++) await limiter.limit(`key-${i}`, policy, options);
    expect(limiter.localFirstStats()).toMatchObject({ views: 100_000, local: 2 });
    // The dropped view's push goes with the syncs of its tick.
    await expect.poll(async () => (await limiter.look('oldest', policy, options)).remaining, { timeout: 1_000, interval: 1 }).toBe(7);
  });
});

describe('local-first on Redis', () => {
  it('three nodes in real time: over-admission within the bound, store calls divided', async () => {
    const nodes = [await redisNode(), await redisNode(), await redisNode()];
    const syncMs = 100;
    const policy: Policy = { algorithm: 'fixed-window', limit: 300, window: 86_400_000 };
    const trace = burstyTrace(500, 5);
    const run = async (key: string, options: { syncIntervalMs?: number }): Promise<number> => {
      const started = Date.now();
      let admitted = 0;
      for (let i = 0; i < trace.length; ) {
        const at = trace[i]!.at;
        const wait = started + at - Date.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        const burst: Promise<boolean>[] = [];
        for (; i < trace.length && trace[i]!.at === at; i++) burst.push(nodes[trace[i]!.node]!.limit(key, policy, options).then((d) => d.allowed));
        for (const allowed of await Promise.all(burst)) if (allowed) admitted += 1;
      }
      return admitted;
    };
    redis.cli('CONFIG', 'RESETSTAT');
    const exact = await run(unique('exact'), {});
    const exactCalls = scriptCalls();
    redis.cli('CONFIG', 'RESETSTAT');
    const local = await run(unique('local'), { syncIntervalMs: syncMs });
    const localCalls = scriptCalls();
    // A view is at most 3 intervals old (else the store decides), plus a round trip on a busy machine.
    const bound = overAdmissionBound(trace, 3 * syncMs + 100);
    const typical = overAdmissionBound(trace, syncMs);
    console.log(`[local-first] redis, fixed-window, 3 nodes, limit 300, 500 bursty requests over ${trace.at(-1)!.at} ms, sync ${syncMs} ms: admitted ${local} vs exact ${exact} (over ${local - exact}; bound ${bound}, one-interval bound ${typical}); script calls ${localCalls} vs ${exactCalls}`);
    const decidedLocally = nodes.reduce((sum, node) => sum + (node.localFirstStats()?.local ?? 0), 0);
    console.log(`[local-first] redis: ${decidedLocally} of ${trace.length} decided without a store round trip`);
    expect(exact).toBe(300);
    expect(local).toBeGreaterThanOrEqual(300);
    expect(local - exact).toBeLessThanOrEqual(bound);
    expect(decidedLocally).toBeGreaterThan(trace.length * 0.8);
    expect(localCalls).toBeLessThan(exactCalls);
  });

  it('one node: exactly the limit, its counts reach Redis, and a cold key costs one store call (decision and sync together)', async () => {
    const limiter = await redisNode();
    const other = await redisNode();
    const policy: Policy = { algorithm: 'sliding-window', limit: 50, window: '1h' };
    const key = unique('one');
    redis.cli('CONFIG', 'RESETSTAT');
    await limiter.limit(key, policy, { syncIntervalMs: 1_000 });
    expect(scriptCalls()).toBe(1);
    let admitted = 1;
    for (let i = 0; i < 79; i++) if ((await limiter.limit(key, policy, { syncIntervalMs: 1_000 })).allowed) admitted += 1;
    expect(admitted).toBe(50);
    await limiter.close();
    expect((await other.look(key, policy)).remaining).toBe(0);
  });

  it('decisions in the store\'s time are whole ms: now, resetAt and retryAfter of local decisions are integers (issue 26, item 3)', async () => {
    const limiter = await redisNode();
    opened.push(limiter);
    // A small limit in a short window: denials (retryAfter > 0) as well as admissions.
    const policy: Policy = { algorithm: 'fixed-window', limit: 5, window: 200 };
    const key = unique('whole-ms');
    const decisions = [];
    // Each sync answered sets the store's clock offset, (sent + answered) / 2 away from this
    // process's clock: half of them land on a half ms. 40 syncs, each followed by local decisions.
    for (let round = 0; round < 40; round++) {
      for (let i = 0; i < 4; i++) decisions.push(await limiter.limit(key, policy, { syncIntervalMs: 10 }));
      await new Promise((resolve) => setTimeout(resolve, 12));
    }
    expect(limiter.localFirstStats()!.local).toBeGreaterThan(80);
    const fractional = decisions.filter((d) => !Number.isInteger(d.now) || !Number.isInteger(d.resetAt) || !Number.isInteger(d.retryAfter));
    expect(fractional.map(({ now, resetAt, retryAfter }) => ({ now, resetAt, retryAfter }))).toEqual([]);
    expect(decisions.some((d) => !d.allowed && d.retryAfter > 0)).toBe(true);
  });

  it('a store that stops answering: the views go stale after 3 intervals and the failure mode answers', async () => {
    const store = redisStore({ url: redis.url });
    stores.push(store);
    await store.ready();
    const limiter = createLimiter({ store, deadlineMs: 100, failureMode: 'closed' });
    opened.push(limiter);
    const policy: Policy = { algorithm: 'fixed-window', limit: 1_000, window: '1h' };
    const key = unique('stale');
    expect((await limiter.limit(key, policy, { syncIntervalMs: 50 })).allowed).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await limiter.limit(key, policy, { syncIntervalMs: 50 })).reason).toBeUndefined();
    redis.cli('CLIENT', 'PAUSE', '1500', 'ALL');
    await new Promise((resolve) => setTimeout(resolve, 400));
    const during = await limiter.limit(key, policy, { syncIntervalMs: 50 });
    expect(during.reason).toBe('fail-closed');
    redis.cli('CLIENT', 'UNPAUSE');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const after = await limiter.limit(key, policy, { syncIntervalMs: 50 });
    expect(after.allowed).toBe(true);
  });

  it('rules: sync_interval_ms on a rate_limit decides that limit locally; bad values are refused at load', async () => {
    const yaml = 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 40, sync_interval_ms: 100 }\n';
    const rules = compileRules(parseRules(yaml, 'rules.yaml'));
    const store = redisStore({ url: redis.url });
    stores.push(store);
    await store.ready();
    const limiter = createLimiter({ store, deadlineMs: 5_000, rules: { current: rules } as never });
    opened.push(limiter);
    const value = unique('u');
    let admitted = 0;
    for (let i = 0; i < 60; i++) {
      if ((await limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value }] }] })).overallCode === 'OK') admitted += 1;
    }
    expect(admitted).toBe(40);
    expect(limiter.localFirstStats()!.local).toBeGreaterThan(50);
    for (const [field, message] of [
      ['sync_interval_ms: 5', /sync_interval_ms.*10/],
      ['sync_interval_ms: 100, algorithm: gcra', /sync_interval_ms \(local-first\) needs algorithm fixed-window or sliding-window/],
      ['sync_interval_ms: 100, lease_size: 4', /keep one/],
    ] as const) {
      expect(() => parseRules(`domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 40, ${field} }\n`, 'rules.yaml')).toThrow(RulesError);
      expect(() => parseRules(`domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 40, ${field} }\n`, 'rules.yaml')).toThrow(message);
    }
  });

  it('tollgate serve: a rule with sync_interval_ms decides on the node, counted in /metrics', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-local-first-'));
    // A sync interval the test never outlasts: a view is decided on for 3 intervals after its last
    // answered sync, and at 100 ms a busy machine let some requests go stale and to the store.
    writeFileSync(join(dir, 'api.yaml'), 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 30, sync_interval_ms: 5000 }\n');
    // A generous store deadline: a sync that outlives the default 50 ms on a busy machine but reaches
    // Redis is pushed again and counted twice (src/limiter/local-first.ts), admitting fewer than 30
    // (27 of 30 seen at load 14).
    const service = await startService(
      resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: dir, redis: redis.url, 'log-level': 'silent', host: '127.0.0.1', 'drain-delay': '0', 'deadline-ms': '5000' }, {}),
    );
    try {
      const body = JSON.stringify({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value: unique('alice') }] }] });
      const codes = [];
      for (let i = 0; i < 40; i++) codes.push((await fetch(`http://127.0.0.1:${service.httpPort!}/json`, { method: 'POST', body })).status);
      expect(codes.filter((code) => code === 200)).toHaveLength(30);
      expect(codes.slice(30).every((code) => code === 429)).toBe(true);
      const metrics = await (await fetch(`http://127.0.0.1:${service.adminPort}/metrics`)).text();
      const value = (name: string): number => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(metrics)?.[1]);
      // 40 requests: the 9 refused after the first local refusal are answered by the over-limit
      // cache, and the store decides the first one and, when the rules synced through Redis replace
      // the loaded ones while the test runs, the first after that (a recompiled policy starts a new view).
      expect(value('tollgate_local_first_decisions_total')).toBeGreaterThanOrEqual(29);
      expect(value('tollgate_local_first_views')).toBe(1);
      expect(metrics).toMatch(/^tollgate_local_first_syncs_total\{result="ok"\} [1-9]/m);
    } finally {
      await service.close();
    }
  });

  it('middleware: a limit with syncIntervalMs (or lease) decides through its mode; bad limits are refused', async () => {
    const store = redisStore({ url: redis.url, keyPrefix: `${unique('mw')}:` });
    stores.push(store);
    await store.ready();
    for (const limit of [
      { name: 'local', policy: { algorithm: 'sliding-window', limit: 20, window: '1h' }, syncIntervalMs: 50 },
      { name: 'leased', policy: { algorithm: 'fixed-window', limit: 20, window: '1h' }, lease: 5 },
    ] as const) {
      const app = await startApp('express', [{ store, deadlineMs: 5_000, limits: [limit] }]);
      try {
        redis.cli('CONFIG', 'RESETSTAT');
        const codes = [];
        for (let i = 0; i < 30; i++) codes.push((await fetch(`${app.url}/hello`)).status);
        expect(codes.filter((code) => code === 200), limit.name).toHaveLength(20);
        expect(codes.slice(20).every((code) => code === 429)).toBe(true);
        // One store call per request in the exact mode; far fewer here.
        expect(scriptCalls(), limit.name).toBeLessThan(20);
      } finally {
        await app.close();
      }
    }
    const { rateLimit } = await import('../../src/http/index.js');
    expect(() => rateLimit({ limits: [{ policy: { algorithm: 'gcra', limit: 3, window: '1h' }, syncIntervalMs: 50 }] })).toThrow(/limits\[0\]\.syncIntervalMs \(local-first\) needs a fixed-window or sliding-window policy/);
    expect(() => rateLimit({ limits: [{ policy: { algorithm: 'fixed-window', limit: 3, window: '1h' }, syncIntervalMs: 50, lease: 3 }] })).toThrow(/not both/);
    expect(() => rateLimit({ limits: [{ policy: { algorithm: 'fixed-window', limit: 3, window: '1h' }, lease: 1 }] })).toThrow(/limits\[0\]\.lease must be a whole number/);
    expect(() => rateLimit({ limits: [{ policy: { algorithm: 'gcra', limit: 3, window: '1h' }, lease: 3 }] })).toThrow(/limits\[0\]\.lease: a lease keeps the caps of fixed-window and sliding-window only, not gcra/);
  });

  it('refuses what it cannot do, with errors that say why', async () => {
    const limiter = createLimiter();
    opened.push(limiter);
    const window: Policy = { algorithm: 'fixed-window', limit: 3, window: '1h' };
    await expect(limiter.limit('k', window, { syncIntervalMs: 5 })).rejects.toThrow(/syncIntervalMs \(local-first\) must be a whole number of ms from 10 to 60000/);
    await expect(limiter.limit('k', window, { syncIntervalMs: 50.5 })).rejects.toThrow(InvalidOptionError);
    await expect(limiter.limit('k', window, { syncIntervalMs: 50, lease: 4 })).rejects.toThrow(/not both/);
    await expect(limiter.limit('k', { algorithm: 'gcra', limit: 3, window: '1h' }, { syncIntervalMs: 50 })).rejects.toThrow(/needs a fixed-window or sliding-window policy.*decide exactly \(a lease keeps fixed-window and sliding-window caps only\)/);
    await expect(limiter.limitAll([{ key: 'k', policy: window, syncIntervalMs: 0 }])).rejects.toThrow(/limitAll: syncIntervalMs/);
  });

  it('the stores add only to window counters: the script refuses another algorithm or an add inside a group', async () => {
    const store = redisStore({ url: redis.url });
    stores.push(store);
    await store.ready();
    const gcra = compilePolicy({ algorithm: 'gcra', limit: 3, window: '1h' });
    await expect(store.addToWindow('k', gcra, 1, undefined)).rejects.toThrow(/add: a group of one fixed-window or sliding-window \(precision 1\) request/);
    expect(() => memoryStore().addToWindow('k', gcra, 1, undefined)).toThrow(/not to a gcra state/);
    // A sliding window of N > 1 buckets keeps N + 1 counts, which a sync's (count, start, previous) cannot carry.
    const buckets = compilePolicy({ algorithm: 'sliding-window', limit: 3, window: '1h', precision: 10 });
    await expect(store.addToWindow('k', buckets, 1, undefined)).rejects.toThrow(/add: a group of one fixed-window or sliding-window \(precision 1\) request/);
    expect(() => memoryStore().addToWindow('k', buckets, 1, undefined)).toThrow(/not to a sliding-window \(precision 10\) state/);
    const fixed = compilePolicy({ algorithm: 'fixed-window', limit: 3, window: '1h' });
    const counts = await store.addToWindow(unique('k'), fixed, 5, T0);
    expect(counts).toEqual({ now: T0, state: [5, Math.floor(T0 / 3_600_000) * 3_600_000] });
  });
});
