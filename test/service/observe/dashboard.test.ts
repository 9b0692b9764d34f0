/**
 * The live dashboard on the real service over real HTTP: the page is self-contained (inline, no
 * external URL, CSP by hash), GET /v1/events streams one aggregated snapshot a second, cleans up
 * on disconnect and stays bounded; and the page itself, in headless Chromium, updates its chart and
 * counters from live traffic (screenshot in test-artifacts/). On a real Redis that is SIGKILLed and
 * restarted, the snapshots (and the page) show the trouble: the breaker open, checks answered by a
 * failure mode and fallbacks per second, a growing time since the store was healthy; then healthy.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { get, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Script } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckEvent, ServiceContext } from '../../../src/service/context.js';
import { DashboardAggregate, HISTORY_SECONDS, KEY_SLOTS, MAX_CLIENTS, MAX_RULES, OTHER_RULES, TopKeys } from '../../../src/service/observe/dashboard.js';
import { DASHBOARD_SCRIPT, DASHBOARD_STYLE } from '../../../src/service/observe/dashboard-page.js';
import { healthInfo } from '../../../src/service/observe/dashboard-health.js';
import type { DegradedReason } from '../../../src/limiter/failure-modes.js';
import type { StoreHealthSnapshot } from '../../../src/limiter/store-guard.js';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';
import { compileRules } from '../../../src/rules/ruleset.js';
import { parseRules } from '../../../src/rules/parse/index.js';
import { useRedisServer } from '../../support/redis-topologies.js';
import { ARTIFACTS, haveChromium, launchChromium, watchProblems } from '../../support/chromium.js';

const LOGIN_RULE = 'classic.action=login.user';

/** Each started service's admin listener (metrics, dashboard, events), by its decision URL. */
const adminBases = new Map<string, string>();
const admin = (base: string): string => adminBases.get(base)!;

async function start(config = 'examples/rules', extra: Record<string, string> = {}): Promise<{ service: RunningService; base: string }> {
  const service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config, 'log-level': 'silent', ...extra }, {}));
  const base = `http://127.0.0.1:${service.httpPort!}`;
  adminBases.set(base, `http://127.0.0.1:${service.adminPort}`);
  return { service, base };
}

async function check(base: string, domain: string, descriptors: unknown[]): Promise<number> {
  const response = await fetch(`${base}/v1/check`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ domain, descriptors }) });
  await response.arrayBuffer();
  return response.status;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Checks sent one after another (a pause between) until stopped; resolves with their statuses. */
function steadyChecks(base: string, pauseMs = 20): { stop(): Promise<number[]> } {
  let running = true;
  const statuses: number[] = [];
  const done = (async () => {
    for (let i = 0; running; i++) {
      statuses.push(await check(base, 'per_ip', [{ remote_address: `192.0.2.${i % 200}` }]));
      await sleep(pauseMs);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await done;
      return statuses;
    },
  };
}

interface StreamEvent {
  readonly event: string;
  readonly data: unknown;
  readonly at: number;
}

/* eslint-disable @typescript-eslint/no-explicit-any -- snapshots are JSON read by the tests */
type Snapshot = any;
// The functions given to the page run in the browser; this project is type-checked without the
// DOM library, so the few browser globals they use are declared here (in this module only).
declare const document: any;
declare const getComputedStyle: any;
type HTMLCanvasElement = any;
type HTMLElement = any;

/** A client of GET /v1/events that parses the stream as it arrives. */
class EventStream {
  readonly events: StreamEvent[] = [];
  response!: IncomingMessage;
  ended = false;
  private buffer = '';
  private waiters: (() => void)[] = [];

  static open(base: string): Promise<EventStream> {
    const stream = new EventStream();
    return new Promise((resolve, reject) => {
      const request = get(`${admin(base)}/v1/events`, (response) => {
        stream.response = response;
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => stream.feed(chunk));
        response.on('end', () => {
          stream.ended = true;
          stream.wake();
        });
        response.on('error', () => undefined);
        resolve(stream);
      });
      request.on('error', reject);
    });
  }

  private feed(chunk: string): void {
    this.buffer += chunk;
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) >= 0) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      if (data.length > 0) this.events.push({ event, data: JSON.parse(data.join('\n')), at: Date.now() });
    }
    this.wake();
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }

  snapshots(): Snapshot[] {
    return this.events.filter((e) => e.event === 'snapshot').map((e) => e.data);
  }

  /** Resolves with the first snapshot (from index `from`) that satisfies `test`. */
  async next(test: (snapshot: Snapshot) => boolean, timeoutMs = 5_000, from = 0): Promise<Snapshot> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.snapshots().slice(from).find(test);
      if (found !== undefined) return found;
      if (this.ended) throw new Error('the event stream ended');
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no matching snapshot within ${timeoutMs} ms (${this.snapshots().length} received)`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.response.destroy();
  }
}

const loginRow = (snapshot: Snapshot) => snapshot.rules.find((r: { rule: string }) => r.rule === LOGIN_RULE);

describe('GET /dashboard', () => {
  let service: RunningService;
  let base: string;

  beforeAll(async () => {
    ({ service, base } = await start());
  });
  afterAll(async () => {
    await service.close();
  });

  it('is one self-contained page: inline style and script allowed by hash, no external URL', async () => {
    const response = await fetch(`${admin(base)}/dashboard`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await response.text();
    const hash = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;
    const csp = response.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain(`script-src ${hash(DASHBOARD_SCRIPT)}`);
    expect(csp).toContain(`style-src ${hash(DASHBOARD_STYLE)}`);
    expect(csp).toContain("connect-src 'self'");
    expect(html).toContain(`<script>${DASHBOARD_SCRIPT}</script>`);
    expect(html).toContain(`<style>${DASHBOARD_STYLE}</style>`);
    expect(html).not.toMatch(/https?:\/\//);
    expect(html).not.toMatch(/(src|href)=["']?\/\//);
    expect(html).not.toMatch(/<script[^>]*\ssrc=/);
    expect(html).not.toMatch(/<link[^>]*stylesheet/);
    expect(html).not.toMatch(/@import|url\(/);
    expect(html).toContain('<canvas id="chart"');
    expect(html).toContain("new EventSource('/v1/events')");
    // The script is valid JavaScript (the browser test runs it).
    expect(() => new Script(DASHBOARD_SCRIPT)).not.toThrow();
  });

  it('streams a history, then one aggregated snapshot a second that follows the traffic', async () => {
    const stream = await EventStream.open(base);
    try {
      expect(stream.response.statusCode).toBe(200);
      expect(stream.response.headers['content-type']).toBe('text/event-stream; charset=utf-8');
      expect(stream.response.headers['cache-control']).toBe('no-store');
      await stream.next(() => true);
      expect(stream.events[0]!.event).toBe('history');
      expect(Array.isArray(stream.events[0]!.data)).toBe(true);

      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) statuses.push(await check(base, 'classic', [{ action: 'login', user: 'bob' }]));
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
      const snapshot = await stream.next((s) => loginRow(s)?.throttled === 1);
      expect(loginRow(snapshot)).toMatchObject({ rule: LOGIN_RULE, domain: 'classic', allowed: 5, throttled: 1, near: 2, shadow: 0 });
      expect(snapshot.totals).toMatchObject({ checks: 6, allowed: 5, throttled: 1, near: 2, deniedChecks: 1 });
      expect(snapshot.topRules[0]).toMatchObject({ rule: LOGIN_RULE, throttled: 1 });
      expect(snapshot.topKeys[0]).toMatchObject({ throttled: 1 });
      expect(snapshot.rulesInfo).toMatchObject({ version: service.context.holder.current.version, domains: ['classic', 'hierarchy', 'hybrid', 'per_api_key', 'per_ip', 'per_user'] });
      expect(snapshot.rulesInfo.watcher).toMatchObject({ failures: 0, lastError: null });
      expect(snapshot.store).toMatchObject({ name: 'memory', fallback: 'local (limit / 1)', errorsTotal: 0 });
      expect(snapshot.store.keys).toBeGreaterThanOrEqual(1);
      // A memory store is always healthy: breaker closed, no time since healthy, nothing degraded.
      expect(snapshot.health).toEqual({
        breaker: 'closed',
        lastHealthyAt: null,
        sinceHealthyMs: null,
        unhealthyForMs: null,
        lastFailureAt: null,
        lastError: null,
        inFlight: 0,
        fallbacks: { timeout: 0, error: 0, 'breaker-open': 0, overload: 0 },
        fallbacksTotal: 0,
      });
      expect(snapshot.totals).toMatchObject({ degraded: 0, failOpen: 0, failClosed: 0, localFallback: 0, fallbacks: 0 });
      expect(snapshot.second).toMatchObject({ breaker: 'closed', degraded: 0, fallbacks: 0, fallbacksBy: { timeout: 0, error: 0, 'breaker-open': 0, overload: 0 } });
      expect(snapshot.clients).toBe(1);
      // The seconds' counts add up to the totals.
      const seconds = stream.snapshots().map((s) => s.second);
      expect(seconds.reduce((sum: number, s: Snapshot) => sum + s.throttled, 0)).toBe(1);

      // One snapshot a second however many decisions: 300 checks, still about one a second.
      const firstIndex = stream.snapshots().length;
      const started = Date.now();
      await Promise.all(Array.from({ length: 300 }, (_, i) => check(base, 'per_ip', [{ remote_address: `198.51.100.${i % 50}` }])));
      await stream.next((s) => s.totals.checks >= 306, 5_000, firstIndex);
      await new Promise((resolve) => setTimeout(resolve, 2_100));
      const elapsed = Date.now() - started;
      const received = stream.snapshots().slice(firstIndex);
      expect(received.length).toBeLessThanOrEqual(Math.ceil(elapsed / 1000) + 1);
      const times = received.map((s) => s.t);
      for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBeGreaterThanOrEqual(900);
      expect(received.at(-1).totals.checks).toBe(306);
    } finally {
      stream.close();
    }
  });

  it('forgets a client that disconnects and refuses more than the maximum', async () => {
    const a = await EventStream.open(base);
    const b = await EventStream.open(base);
    await b.next((s) => s.clients === 2);
    a.close();
    await b.next((s) => s.clients === 1);

    const more: EventStream[] = [];
    try {
      for (let i = 1; i < MAX_CLIENTS; i++) more.push(await EventStream.open(base));
      const refused = await fetch(`${admin(base)}/v1/events`);
      expect(refused.status).toBe(503);
      expect(await refused.json()).toEqual({
        error: 'too_many_clients',
        code: 'ERR_TOLLGATE_TOO_MANY_CLIENTS',
        message: `there are already ${MAX_CLIENTS} event streams, at most ${MAX_CLIENTS} at once; close one and retry`,
      });
    } finally {
      for (const stream of more) stream.close();
    }
    await b.next((s) => s.clients === 1, 5_000, b.snapshots().length);
    b.close();
  });
});

describe('event stream and shutdown', () => {
  it('ends open streams when the service closes, promptly', async () => {
    const { service, base } = await start();
    const stream = await EventStream.open(base);
    await stream.next(() => true);
    const started = Date.now();
    await service.close();
    expect(Date.now() - started).toBeLessThan(3_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(stream.ended || stream.response.destroyed).toBe(true);
  });
});

describe('dashboard aggregate (bounded memory)', () => {
  const rules = compileRules(parseRules('domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 10 }\n', 'test'));
  const health = { breaker: 'closed', lastHealthyAt: undefined, lastFailureAt: undefined, lastError: undefined, inFlight: 0, fallbacks: { timeout: 0, error: 0, 'breaker-open': 0, overload: 0 } };
  const ctx = { holder: { current: rules }, limiter: { health: () => health } } as unknown as ServiceContext;
  const event = (rule: string, code: 'OK' | 'OVER_LIMIT', key?: string, degraded?: DegradedReason): CheckEvent => ({
    domain: 'd',
    via: 'check',
    durationMs: 0.1,
    keys: [key],
    result: {
      overallCode: code,
      statuses: [{ code, limitRemaining: code === 'OK' ? 5 : 0, durationUntilReset: 1000, rule, currentLimit: { requestsPerUnit: 10, unit: 'second', unitMultiplier: 1 } }],
      now: 0,
      ...(degraded !== undefined ? { degraded } : {}),
    },
  });

  it('counts degraded checks by reason, and fallbacks per second from the limiter totals', () => {
    const aggregate = new DashboardAggregate(ctx);
    aggregate.onCheck(event('d.k', 'OK', 'a', 'local-fallback'));
    aggregate.onCheck(event('d.k', 'OK', 'a', 'local-fallback'));
    aggregate.onCheck(event('d.k', 'OVER_LIMIT', 'a', 'fail-closed'));
    aggregate.onCheck(event('d.k', 'OK', 'a', 'fail-open'));
    aggregate.onCheck(event('d.k', 'OK', 'a'));
    const at = (fallbacks: Record<string, number>, breaker = 'open') => ({ ...health, breaker, fallbacks: { ...health.fallbacks, ...fallbacks } }) as StoreHealthSnapshot;
    const first = aggregate.roll(1000, at({ error: 2, 'breaker-open': 5 }));
    expect(first).toMatchObject({ checks: 5, degraded: 4, localFallback: 2, failClosed: 1, failOpen: 1, allowed: 4, throttled: 1, fallbacks: 7, breaker: 'open' });
    expect(first.fallbacksBy).toEqual({ timeout: 0, error: 2, 'breaker-open': 5, overload: 0 });
    // The next second: only the increase of the totals.
    const second = aggregate.roll(2000, at({ error: 2, 'breaker-open': 9, timeout: 1 }, 'half-open'));
    expect(second).toMatchObject({ degraded: 0, fallbacks: 5, breaker: 'half-open', fallbacksBy: { timeout: 1, error: 0, 'breaker-open': 4, overload: 0 } });
    expect(aggregate.roll(3000, at({ error: 2, 'breaker-open': 9, timeout: 1 }, 'closed'))).toMatchObject({ fallbacks: 0, breaker: 'closed' });
    expect(aggregate.totals).toMatchObject({ degraded: 4, localFallback: 2, failClosed: 1, failOpen: 1, fallbacks: 12 });
  });

  it('says how long the store has been unhealthy, never for a memory store, with the last error cut', () => {
    const failing = { ...health, breaker: 'open', lastHealthyAt: 10_000, lastFailureAt: 21_000, lastError: `<b>${'x'.repeat(400)}</b>` } as StoreHealthSnapshot;
    const info = healthInfo(failing, { memory: false, startedAt: 0, now: 22_000 });
    expect(info).toMatchObject({ breaker: 'open', lastHealthyAt: 10_000, sinceHealthyMs: 12_000, unhealthyForMs: 12_000, lastFailureAt: 21_000 });
    expect(info.lastError!.length).toBeLessThanOrEqual(301);
    expect(healthInfo({ ...failing, lastHealthyAt: undefined }, { memory: false, startedAt: 5_000, now: 22_000 })).toMatchObject({ sinceHealthyMs: null, unhealthyForMs: 17_000 });
    expect(healthInfo({ ...failing, breaker: 'closed' }, { memory: false, startedAt: 0, now: 22_000 })).toMatchObject({ sinceHealthyMs: 12_000, unhealthyForMs: null });
    expect(healthInfo({ ...health, lastHealthyAt: 21_000 } as StoreHealthSnapshot, { memory: true, startedAt: 0, now: 22_000 })).toMatchObject({ lastHealthyAt: null, sinceHealthyMs: null });
  });

  it('keeps at most HISTORY_SECONDS seconds and MAX_RULES rules', () => {
    const aggregate = new DashboardAggregate(ctx);
    for (let i = 0; i < MAX_RULES + 50; i++) aggregate.onCheck(event(`d.k=${i}`, 'OK'));
    for (let t = 0; t < HISTORY_SECONDS + 30; t++) aggregate.roll(t * 1000);
    expect(aggregate.recentHistory()).toHaveLength(HISTORY_SECONDS);
    expect(aggregate.recentHistory()[0]!.t).toBe(30_000);
    expect(aggregate.listedRules().length).toBeLessThanOrEqual(50);
    expect(aggregate.totals.allowed).toBe(MAX_RULES + 50);
    // The 50 rules past the cap are counted together.
    const other = new DashboardAggregate(ctx);
    for (let i = 0; i < MAX_RULES + 50; i++) other.onCheck(event(`d.k=${i}`, 'OK'));
    other.onCheck(event('d.k=new', 'OK'));
    other.onCheck(event('d.k=new', 'OK'));
    expect(other.listedRules()[0]).toMatchObject({ rule: OTHER_RULES, allowed: 52 });
  });

  it('finds the most throttled keys among many in a fixed number of slots', () => {
    const top = new TopKeys(KEY_SLOTS);
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 500; i++) top.add(`noise-${round}-${i}`);
      for (let i = 0; i < 50; i++) top.add('heavy-a');
      for (let i = 0; i < 30; i++) top.add('heavy-b');
    }
    expect(top.size).toBe(KEY_SLOTS);
    const best = top.top(2);
    expect(best.map((k) => k.key)).toEqual(['heavy-a', 'heavy-b']);
    expect(best[0]!.count - best[0]!.error).toBeLessThanOrEqual(1_000);
    expect(best[0]!.count).toBeGreaterThanOrEqual(1_000);

    const aggregate = new DashboardAggregate(ctx);
    aggregate.onCheck(event('d.k', 'OVER_LIMIT', `d|k=${'x'.repeat(1000)}`));
    expect(aggregate.topKeys()[0]!.key.length).toBeLessThanOrEqual(161);
  });
});

describe('dashboard while the store fails (real Redis, SIGKILLed, restarted)', () => {
  const redis = useRedisServer();
  let service: RunningService;
  let base: string;

  beforeAll(async () => {
    ({ service, base } = await start('examples/rules', { redis: redis.url }));
  });
  afterAll(async () => {
    await service.close();
  });

  it('shows the breaker open, degraded checks and fallbacks per second, a growing time since healthy; closed again once Redis is back', { timeout: 20_000 }, async () => {
    const stream = await EventStream.open(base);
    let load: { stop(): Promise<number[]> } | undefined;
    try {
      for (let i = 0; i < 3; i++) expect(await check(base, 'per_ip', [{ remote_address: '198.51.100.7' }])).toBe(200);
      const healthy = await stream.next((s) => s.health.sinceHealthyMs !== null && s.totals.checks >= 3);
      expect(healthy.health).toMatchObject({ breaker: 'closed', unhealthyForMs: null, lastError: null, fallbacksTotal: 0 });
      expect(healthy.health.sinceHealthyMs).toBeLessThan(3_000);
      expect(healthy.totals).toMatchObject({ degraded: 0, fallbacks: 0 });

      process.kill(redis.pid, 'SIGKILL');
      load = steadyChecks(base);
      const from = stream.snapshots().length;
      // The default failure mode (local) answers: every degraded check is a local fallback.
      const open = await stream.next((s) => s.health.breaker === 'open' && s.second.degraded > 0 && s.second.fallbacks > 0, 6_000, from);
      expect(open.second.localFallback).toBe(open.second.degraded);
      expect(open.second.breaker).toBe('open');
      expect(Object.values(open.second.fallbacksBy as Record<string, number>).reduce((a, b) => a + b, 0)).toBe(open.second.fallbacks);
      expect(open.second.fallbacksBy['breaker-open']).toBeGreaterThan(0);
      expect(open.health.fallbacksTotal).toBeGreaterThanOrEqual(open.second.fallbacks);
      expect(open.health.lastError).toEqual(expect.any(String));
      expect(open.health.lastHealthyAt).toBeGreaterThanOrEqual(healthy.health.lastHealthyAt);
      expect(open.health.unhealthyForMs).toBeGreaterThan(0);
      expect(open.store.state).toMatch(/^(degraded|unreachable)$/);
      // A second later it is still open, and unhealthy for longer.
      const later = await stream.next((s) => s.health.unhealthyForMs >= open.health.unhealthyForMs + 900, 4_000, stream.snapshots().indexOf(open) + 1);
      expect(later.health.breaker).not.toBe('closed');
      expect(later.health.sinceHealthyMs).toBeGreaterThan(open.health.sinceHealthyMs);
      expect(later.health.lastHealthyAt).toBe(open.health.lastHealthyAt);
      expect(later.second.degraded).toBeGreaterThan(0);
      expect(later.second.fallbacks).toBeGreaterThan(0);

      await redis.restart();
      const back = await stream.next((s) => s.health.breaker === 'closed', 8_000, stream.snapshots().indexOf(later) + 1);
      expect(back.health.unhealthyForMs).toBeNull();
      expect(back.health.lastHealthyAt).toBeGreaterThan(later.health.lastHealthyAt);
      expect(back.health.sinceHealthyMs).toBeLessThan(2_000);
      const statuses = await load.stop();
      load = undefined;
      // Every check was answered: by Redis or, while it was gone, by the failure mode.
      expect(statuses.filter((status) => status !== 200 && status !== 429)).toEqual([]);
      // The history a new viewer gets holds the outage's seconds.
      const viewer = await EventStream.open(base);
      try {
        await viewer.next(() => true);
        const seconds = viewer.events[0]!.data as Snapshot[];
        expect(seconds.some((second) => second.breaker === 'open' && second.degraded > 0 && second.fallbacks > 0)).toBe(true);
        expect(seconds.at(-1).breaker).toBe('closed');
      } finally {
        viewer.close();
      }
    } finally {
      await load?.stop();
      stream.close();
    }
  });
});

describe.skipIf(!haveChromium)('dashboard in headless Chromium', () => {
  let dir: string;
  let service: RunningService;
  let base: string;

  beforeAll(async () => {
    // The examples, plus a shadow-mode domain so the page has shadow hits to show.
    dir = mkdtempSync(join(tmpdir(), 'tollgate-dashboard-'));
    for (const file of readdirSync('examples/rules')) copyFileSync(join('examples/rules', file), join(dir, file));
    writeFileSync(join(dir, 'shadowed.yaml'), 'domain: shadowed\ndescriptors:\n  - key: tenant\n    shadow_mode: true\n    rate_limit: { unit: minute, requests_per_unit: 2 }\n');
    ({ service, base } = await start(dir));
  });
  afterAll(async () => {
    await service.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('updates the chart and the counters from live traffic', { timeout: 60_000 }, async () => {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
      const problems = watchProblems(page);
      const requests: string[] = [];
      page.on('request', (request) => requests.push(request.url()));

      await page.goto(`${admin(base)}/dashboard`);
      await page.waitForFunction(() => document.getElementById('connection')?.getAttribute('data-value') === 'live');
      await page.waitForFunction(() => Number(document.body.getAttribute('data-snapshots') ?? 0) >= 1, undefined, { timeout: 5_000 });
      const numberOf = (id: string) => page.$eval(`#${id}`, (el) => Number(el.getAttribute('data-value')));
      expect(await numberOf('throttled-total')).toBe(0);
      expect(await page.$eval('#chart', (el) => Number(el.getAttribute('data-throttled-sum')))).toBe(0);

      // Traffic over a few seconds: 8 logins for each of 3 users (5 admitted, 3 throttled each),
      // per-IP checks, and 4 shadow-mode checks (2 over the shadow limit).
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < 8; i++) await check(base, 'classic', [{ action: 'login', user: `user-${round}` }]);
        for (let i = 0; i < 10; i++) await check(base, 'per_ip', [{ remote_address: `203.0.113.${i}` }]);
        await new Promise((resolve) => setTimeout(resolve, 700));
      }
      for (let i = 0; i < 4; i++) expect(await check(base, 'shadowed', [{ tenant: 'acme' }])).toBe(200);
      await fetch(`${base}/v1/check`, { method: 'POST', body: '{ broken' });

      await page.waitForFunction(
        () => {
          const value = (id: string) => Number(document.getElementById(id)?.getAttribute('data-value'));
          return value('throttled-total') === 9 && value('shadow-total') === 2 && value('rejected-total') === 1;
        },
        undefined,
        { timeout: 10_000 },
      );
      expect(await numberOf('checks-total')).toBe(24 + 30 + 4);
      expect(await numberOf('allowed-total')).toBe(15 + 30 + 4);
      expect(await numberOf('near-total')).toBe(3 * 2 + 1);
      expect(await numberOf('shadow-total')).toBe(2);
      expect(await page.$eval('#rules-version', (el) => el.getAttribute('data-value'))).toBe(service.context.holder.current.version);
      expect(await page.$eval('#store-state', (el) => el.getAttribute('data-value'))).toBe('ok');
      expect(await page.$eval('#fallback-state', (el) => el.textContent)).toBe('local (limit / 1)');
      // No trouble: the breaker badge says closed (green), no banner, no time since healthy (memory).
      expect(await page.$eval('#breaker', (el) => [el.getAttribute('data-value'), el.className])).toEqual(['closed', 'pill breaker ok']);
      expect(await page.$eval('#trouble', (el) => (el as HTMLElement).hidden)).toBe(true);
      expect(await page.$eval('#since-healthy', (el) => el.textContent)).toBe('last healthy: \u2014');
      expect(await numberOf('degraded-total')).toBe(0);
      expect(await numberOf('fallbacks-total')).toBe(0);

      // The rules table: the login rule with its totals.
      const row = page.locator(`#rules-body tr[data-rule="${LOGIN_RULE}"]`);
      const cell = (col: string) => row.locator(`td[data-col="${col}"]`).getAttribute('data-value').then(Number);
      expect(await cell('allowed')).toBe(15);
      expect(await cell('throttled')).toBe(9);
      expect(await cell('near')).toBe(6);
      expect(await page.locator('#rules-body tr[data-rule="shadowed.tenant"] td[data-col="shadow"]').getAttribute('data-value')).toBe('2');
      // Top lists: the login rule first; the throttled keys (whatever the event's keys are: rule
      // paths today, or counter keys) add up to the 9 throttled decisions.
      expect(await page.$eval('#top-rules li code', (el) => el.textContent)).toBe(LOGIN_RULE);
      const topKeys = await page.$$eval('#top-keys li', (items) => items.map((li) => Number(li.getAttribute('data-value'))));
      expect(topKeys.reduce((a, b) => a + b, 0)).toBe(9);

      // The chart drew the seconds: allowed and throttled bars, throttled ones in the throttled colour.
      const chart = await page.$eval('#chart', (el) => {
        const canvas = el as HTMLCanvasElement;
        const g = canvas.getContext('2d')!;
        const pixels = g.getImageData(0, 0, canvas.width, canvas.height).data;
        const bad = getComputedStyle(document.documentElement).getPropertyValue('--bad').trim();
        const [r, gg, b] = [1, 3, 5].map((i) => parseInt(bad.slice(i, i + 2), 16));
        let red = 0;
        for (let i = 0; i < pixels.length; i += 4) if (pixels[i] === r && pixels[i + 1] === gg && pixels[i + 2] === b) red += 1;
        return {
          red,
          rule: canvas.getAttribute('data-rule'),
          points: Number(canvas.getAttribute('data-points')),
          allowed: Number(canvas.getAttribute('data-allowed-sum')),
          throttled: Number(canvas.getAttribute('data-throttled-sum')),
          draws: Number(canvas.getAttribute('data-draws')),
        };
      });
      expect(chart.rule).toBe('all');
      expect(chart.throttled).toBe(9);
      expect(chart.allowed).toBe(15 + 30 + 4);
      expect(chart.points).toBeGreaterThanOrEqual(3);
      expect(chart.draws).toBeGreaterThan(1);
      expect(chart.red).toBeGreaterThan(0);
      expect(await page.$eval('#chart', (el) => [el.getAttribute('data-degraded-sum'), el.getAttribute('data-unhealthy-seconds'), el.getAttribute('data-last-breaker')])).toEqual(['0', '0', 'closed']);

      // Charting one rule.
      await page.selectOption('#rule-select', LOGIN_RULE);
      const selected = await page.$eval('#chart', (el) => ({ rule: el.getAttribute('data-rule'), allowed: Number(el.getAttribute('data-allowed-sum')), throttled: Number(el.getAttribute('data-throttled-sum')) }));
      expect(selected).toEqual({ rule: LOGIN_RULE, allowed: 15, throttled: 9 });
      await page.selectOption('#rule-select', '');

      // It keeps going: a second later, more snapshots have been drawn.
      const seen = Number(await page.getAttribute('body', 'data-snapshots'));
      await page.waitForFunction((n) => Number(document.body.getAttribute('data-snapshots')) > n, seen, { timeout: 5_000 });

      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png'), fullPage: true });
      expect(problems).toEqual([]);
      // Nothing but the service was asked for.
      expect(requests.filter((url) => !url.startsWith(admin(base)) && !url.startsWith('data:'))).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});

describe.skipIf(!haveChromium)('dashboard in headless Chromium while Redis is down', () => {
  const redis = useRedisServer();
  let service: RunningService;
  let base: string;

  beforeAll(async () => {
    ({ service, base } = await start('examples/rules', { redis: redis.url }));
  });
  afterAll(async () => {
    await service.close();
  });

  it('shows the outage as trouble: red breaker badge, banner, degraded series, time since healthy; green again after', { timeout: 40_000 }, async () => {
    const browser = await launchChromium();
    let load: { stop(): Promise<number[]> } | undefined;
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
      const problems = watchProblems(page);
      await page.goto(`${admin(base)}/dashboard`);
      for (let i = 0; i < 3; i++) await check(base, 'per_ip', [{ remote_address: '198.51.100.9' }]);
      // The first render and poll of a page (Chromium beside another test file on 2 cores took over 5 s once in CI).
      await page.waitForFunction(() => document.getElementById('breaker')?.getAttribute('data-value') === 'closed' && document.getElementById('since-healthy')?.getAttribute('data-value') !== '', undefined, { timeout: 15_000 });
      expect(await page.$eval('#trouble', (el) => (el as HTMLElement).hidden)).toBe(true);

      process.kill(redis.pid, 'SIGKILL');
      load = steadyChecks(base);
      await page.waitForFunction(
        () => {
          const attr = (id: string, name: string) => document.getElementById(id)?.getAttribute(name);
          return attr('breaker', 'data-value') === 'open' && Number(attr('chart', 'data-degraded-sum')) > 0 && Number(attr('rate-fallbacks', 'data-value')) > 0 && Number(attr('rate-degraded', 'data-value')) > 0;
        },
        undefined,
        { timeout: 8_000 },
      );
      // While open, the badge is red (the --bad colour). A probe may half-open it for an instant: wait for open again.
      const redBadge = () => {
        const el = document.getElementById('breaker');
        const bad = getComputedStyle(document.documentElement).getPropertyValue('--bad').trim();
        const rgb = [1, 3, 5].map((i) => parseInt(bad.slice(i, i + 2), 16));
        return el.getAttribute('data-value') === 'open' && el.textContent === 'store breaker OPEN' && getComputedStyle(el).backgroundColor === `rgb(${rgb.join(', ')})`;
      };
      await page.waitForFunction(redBadge, undefined, { timeout: 3_000 });
      const banner = await page.$eval('#trouble', (el) => ({ hidden: (el as HTMLElement).hidden, text: el.textContent, elements: el.querySelectorAll('*').length }));
      expect(banner.hidden).toBe(false);
      expect(banner.text).toMatch(/^Store unhealthy for [\d.]+ s \(breaker (open|half-open)\):/);
      // The error message is text: no element was made of it.
      expect(banner.elements).toBe(2);
      expect(await page.$eval('#since-healthy', (el) => el.textContent)).toMatch(/^store unhealthy for [\d.]+ s$/);
      expect(await page.$eval('#last-error', (el) => ({ text: el.textContent, elements: el.children.length }))).toMatchObject({ text: expect.stringMatching(/^last error: ./), elements: 0 });
      expect(Number(await page.$eval('#chart', (el) => el.getAttribute('data-unhealthy-seconds')))).toBeGreaterThan(0);
      expect(Number(await page.$eval('#degraded-split', (el) => el.getAttribute('data-local-fallback')))).toBeGreaterThan(0);
      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-outage.png'), fullPage: true });

      await redis.restart();
      await page.waitForFunction(() => document.getElementById('breaker')?.getAttribute('data-value') === 'closed', undefined, { timeout: 10_000 });
      expect(await page.$eval('#trouble', (el) => (el as HTMLElement).hidden)).toBe(true);
      expect(await page.$eval('#breaker', (el) => el.className)).toBe('pill breaker ok');
      expect(problems).toEqual([]);
    } finally {
      await load?.stop();
      await browser.close();
    }
  });
});
