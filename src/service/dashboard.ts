/**
 * The live dashboard: GET /dashboard serves one self-contained page (dashboard-page.ts), fed by
 * Server-Sent Events from GET /v1/events. Decisions are aggregated here, in memory bounded by
 * constants (rules tracked, keys tracked, seconds of history, clients), and one snapshot a second
 * is built once and written to every client, whatever the traffic.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { BreakerState } from '../fault/breaker.js';
import type { DegradedReason } from '../fault/failure-mode.js';
import type { StoreHealthSnapshot } from '../fault/guard.js';
import type { CheckEvent, RejectedEvent, ServiceContext, StoreErrorEvent } from './context.js';
import { FallbackRate, healthInfo, sumCauses, type CauseCounts } from './dashboard-health.js';
import { DASHBOARD_SCRIPT, DASHBOARD_STYLE, dashboardHtml } from './dashboard-page.js';
import type { HttpRoutes } from './http.js';
import { HttpError, sendJson } from './http-util.js';
import { classifyCheck, listenToEvents, memoryStats, NO_RULE, ruleIndex } from './metrics.js';

/** How often a snapshot is sent, in ms. */
export const SNAPSHOT_INTERVAL_MS = 1_000;
/** Seconds of per-second history kept (and sent to a client that connects). */
export const HISTORY_SECONDS = 120;
/** Distinct rules tracked; decisions of later ones are counted under {@link OTHER_RULES}. */
export const MAX_RULES = 500;
/** Rules listed per snapshot (the busiest), and entries in the top-N lists. */
export const MAX_LISTED_RULES = 50;
export const TOP_N = 10;
/** Counters of the most-throttled-keys sketch (Space-Saving: the true top keys are found within its error). */
export const KEY_SLOTS = 128;
/** Longest key shown (keys may be long; they are cut, never used as labels). */
const MAX_KEY_CHARS = 160;
/** Simultaneous event-stream clients; more get a 503. */
export const MAX_CLIENTS = 32;
/** A client whose unsent data passes this is dropped (it stopped reading). */
const MAX_BUFFERED_BYTES = 512 * 1024;
export const OTHER_RULES = '(other rules)';

/** Per-rule counts: allowed, throttled, shadow-mode hits, near-limit. */
interface RuleCounts {
  allowed: number;
  throttled: number;
  shadow: number;
  near: number;
}

/** Checks a failure mode answered (a check's `result.degraded`): all, and by reason. */
interface DegradedCounts {
  degraded: number;
  failOpen: number;
  failClosed: number;
  localFallback: number;
}

const DEGRADED_FIELD: Record<DegradedReason, keyof DegradedCounts> = { 'fail-open': 'failOpen', 'fail-closed': 'failClosed', 'local-fallback': 'localFallback' };

/** Totals of one second, or since start. `fallbacks`: store calls answered by a failure mode. */
interface Totals extends RuleCounts, DegradedCounts {
  checks: number;
  deniedChecks: number;
  unmatched: number;
  rejected: number;
  storeErrors: number;
  fallbacks: number;
}

/**
 * One second as sent: totals, per rule `[rule, allowed, throttled, shadow, near]`, the breaker's
 * state when the second closed and the second's fallbacks by cause.
 */
interface SecondSnapshot extends Totals {
  t: number;
  rules: [string, number, number, number, number][];
  breaker: BreakerState;
  fallbacksBy: CauseCounts;
}

const zeroCounts = (): RuleCounts => ({ allowed: 0, throttled: 0, shadow: 0, near: 0 });
const zeroDegraded = (): DegradedCounts => ({ degraded: 0, failOpen: 0, failClosed: 0, localFallback: 0 });
const zeroTotals = (): Totals => ({ ...zeroCounts(), ...zeroDegraded(), checks: 0, deniedChecks: 0, unmatched: 0, rejected: 0, storeErrors: 0, fallbacks: 0 });

/**
 * Space-Saving: the most frequent of an unbounded stream of keys in `slots` counters. A key not
 * held replaces the smallest counter, inheriting its count as its possible overcount (`error`).
 */
export class TopKeys {
  private readonly counts = new Map<string, { count: number; error: number }>();

  constructor(private readonly slots: number) {}

  add(key: string): void {
    const entry = this.counts.get(key);
    if (entry !== undefined) {
      entry.count += 1;
      return;
    }
    if (this.counts.size < this.slots) {
      this.counts.set(key, { count: 1, error: 0 });
      return;
    }
    let minKey: string | undefined;
    let min = Infinity;
    for (const [held, { count }] of this.counts) {
      if (count < min) {
        min = count;
        minKey = held;
      }
    }
    this.counts.delete(minKey!);
    this.counts.set(key, { count: min + 1, error: min });
  }

  top(n: number): { key: string; count: number; error: number }[] {
    return [...this.counts]
      .map(([key, { count, error }]) => ({ key, count, error }))
      .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1))
      .slice(0, n);
  }

  get size(): number {
    return this.counts.size;
  }
}

/** The aggregate behind the dashboard: fed by the event stream, read once a second. */
export class DashboardAggregate {
  private second = zeroTotals();
  private secondRules = new Map<string, RuleCounts>();
  readonly totals = zeroTotals();
  private readonly ruleTotals = new Map<string, RuleCounts & { domain: string }>();
  private readonly keys = new TopKeys(KEY_SLOTS);
  private readonly history: SecondSnapshot[] = [];
  lastStoreError: { kind: string; at: number } | undefined;
  /** Store errors in the last few seconds (for the store's state). */
  private recentStoreErrors: number[] = [];
  private readonly fallbackRate = new FallbackRate();

  constructor(private readonly ctx: ServiceContext) {}

  private ruleName(rule: string): string {
    return this.ruleTotals.has(rule) || this.ruleTotals.size < MAX_RULES ? rule : OTHER_RULES;
  }

  onCheck(event: CheckEvent): void {
    this.second.checks += 1;
    if (event.result.overallCode === 'OVER_LIMIT') this.second.deniedChecks += 1;
    const degraded = event.result.degraded;
    if (degraded !== undefined) {
      this.second.degraded += 1;
      this.second[DEGRADED_FIELD[degraded]] += 1;
    }
    for (const outcome of classifyCheck(this.ctx.holder.current, event)) {
      if (outcome.rule === NO_RULE) {
        this.second.unmatched += 1;
        continue;
      }
      const rule = this.ruleName(outcome.rule);
      let total = this.ruleTotals.get(rule);
      if (total === undefined) {
        total = { ...zeroCounts(), domain: rule === OTHER_RULES ? '' : outcome.domain };
        this.ruleTotals.set(rule, total);
      }
      let now = this.secondRules.get(rule);
      if (now === undefined) {
        now = zeroCounts();
        this.secondRules.set(rule, now);
      }
      const bump = (field: keyof RuleCounts): void => {
        now[field] += 1;
        total[field] += 1;
        this.second[field] += 1;
      };
      // Denied only because another limit of the request denied it: neither admitted nor throttled here.
      if (outcome.reason === 'other_limit_exceeded') continue;
      if (outcome.result === 'over_limit') {
        bump('throttled');
        const key = outcome.key ?? outcome.rule;
        this.keys.add(key.length > MAX_KEY_CHARS ? `${key.slice(0, MAX_KEY_CHARS)}…` : key);
      } else {
        bump('allowed');
      }
      if (outcome.result === 'shadow_over_limit') bump('shadow');
      if (outcome.near) bump('near');
    }
  }

  onRejected(_event: RejectedEvent): void {
    this.second.rejected += 1;
  }

  onStoreError(event: StoreErrorEvent): void {
    this.second.storeErrors += 1;
    this.lastStoreError = { kind: event.kind.slice(0, 64), at: Date.now() };
  }

  /**
   * Closes the current second: adds it to the totals and the history; returns it. `health` is the
   * limiter's, read now: its fallback totals' increase are the second's fallbacks.
   */
  roll(t: number, health: StoreHealthSnapshot = this.ctx.limiter.health()): SecondSnapshot {
    const fallbacksBy = this.fallbackRate.delta(health);
    this.second.fallbacks = sumCauses(fallbacksBy);
    const second: SecondSnapshot = {
      ...this.second,
      t,
      rules: [...this.secondRules].map(([rule, c]) => [rule, c.allowed, c.throttled, c.shadow, c.near]),
      breaker: health.breaker,
      fallbacksBy,
    };
    for (const field of Object.keys(this.totals) as (keyof Totals)[]) this.totals[field] += this.second[field];
    this.recentStoreErrors.push(this.second.storeErrors);
    if (this.recentStoreErrors.length > 10) this.recentStoreErrors.shift();
    this.second = zeroTotals();
    this.secondRules = new Map();
    this.history.push(second);
    if (this.history.length > HISTORY_SECONDS) this.history.shift();
    return second;
  }

  recentHistory(): readonly SecondSnapshot[] {
    return this.history;
  }

  storeErrorsLast10s(): number {
    return this.recentStoreErrors.reduce((a, b) => a + b, 0);
  }

  /** The busiest rules (by decisions) with their totals. */
  listedRules(): { rule: string; domain: string; allowed: number; throttled: number; shadow: number; near: number }[] {
    return [...this.ruleTotals]
      .map(([rule, c]) => ({ rule, domain: c.domain, allowed: c.allowed, throttled: c.throttled, shadow: c.shadow, near: c.near }))
      .sort((a, b) => b.allowed + b.throttled - (a.allowed + a.throttled) || (a.rule < b.rule ? -1 : 1))
      .slice(0, MAX_LISTED_RULES);
  }

  topRules(): { rule: string; throttled: number; allowed: number }[] {
    return [...this.ruleTotals]
      .filter(([, c]) => c.throttled > 0)
      .map(([rule, c]) => ({ rule, throttled: c.throttled, allowed: c.allowed }))
      .sort((a, b) => b.throttled - a.throttled || (a.rule < b.rule ? -1 : 1))
      .slice(0, TOP_N);
  }

  topKeys(): { key: string; throttled: number; error: number }[] {
    return this.keys.top(TOP_N).map(({ key, count, error }) => ({ key, throttled: count, error }));
  }
}

interface Client {
  readonly request: IncomingMessage;
  readonly response: ServerResponse;
}

/** The clients of GET /v1/events. */
class EventStreamClients {
  private readonly clients = new Set<Client>();

  get size(): number {
    return this.clients.size;
  }

  add(client: Client): void {
    this.clients.add(client);
  }

  drop(client: Client): void {
    if (!this.clients.delete(client)) return;
    // An event stream's connection is never reused: close it, so a shutting-down server need not
    // wait for the keep-alive timeout.
    if (!client.response.writableEnded) client.response.end(() => client.request.socket.end());
  }

  dropAll(): void {
    for (const client of [...this.clients]) this.drop(client);
  }

  /** Writes `text` to every client. */
  broadcast(text: string): void {
    for (const client of this.clients) {
      // The server is shutting down: end the stream so it can close.
      const server = (client.request.socket as Socket & { server?: Server }).server;
      if (server !== undefined && !server.listening) this.drop(client);
      else this.send(client, text);
    }
  }

  private send(client: Client, text: string): void {
    const { response } = client;
    // A client that stopped reading is dropped rather than buffered without end.
    if (response.writableLength > MAX_BUFFERED_BYTES) {
      this.drop(client);
      client.request.socket.destroy();
      return;
    }
    response.write(text);
  }
}

type Readiness = { ready: boolean; details: Record<string, unknown> };

/** The latest readiness, for the store's state. Readiness may ask Redis: one probe at a time. */
class ReadinessProbe {
  latest: Readiness | undefined;
  private running = false;

  constructor(private readonly ctx: ServiceContext) {}

  refresh(): void {
    if (this.running) return;
    this.running = true;
    this.ctx
      .readiness()
      .then(
        (result) => (this.latest = result),
        (error: unknown) => (this.latest = { ready: false, details: { error: (error as Error).message } }),
      )
      .finally(() => (this.running = false));
  }
}

/** The rules part of a snapshot: version, domains, and the reload sources' counts. */
function rulesInfo(ctx: ServiceContext): Record<string, unknown> {
  const rules = ctx.holder.current;
  const watcher = ctx.watcher?.status();
  const sync = ctx.sync?.status();
  return {
    version: rules.version,
    domains: rules.domainNames(),
    rules: ruleIndex(rules).size,
    ...(watcher !== undefined ? { watcher: { reloads: watcher.reloads, failures: watcher.failures, lastError: watcher.lastError ?? null } } : {}),
    ...(sync !== undefined ? { sync: { version: sync.version, applied: sync.applied, refused: sync.refused, lastError: sync.lastError ?? null } } : {}),
  };
}

/**
 * The store part of a snapshot: its state (from readiness, the breaker and recent errors), fallback
 * and counters.
 */
function storeInfo(ctx: ServiceContext, aggregate: DashboardAggregate, readiness: Readiness | undefined, breaker: BreakerState): Record<string, unknown> {
  const stats = memoryStats(ctx);
  const errors10s = aggregate.storeErrorsLast10s();
  const details = readiness?.details ?? {};
  const reachable = typeof details.storeReachable === 'boolean' ? details.storeReachable : undefined;
  const fallback = details.fallback;
  return {
    name: ctx.store.name,
    state: reachable === false ? 'unreachable' : breaker !== 'closed' ? 'degraded' : errors10s > 0 ? 'errors' : readiness === undefined ? 'unknown' : 'ok',
    ...(reachable !== undefined ? { reachable } : {}),
    errorsLast10s: errors10s,
    errorsTotal: aggregate.totals.storeErrors,
    lastError: aggregate.lastStoreError ?? null,
    fallback: fallback === undefined ? null : fallback,
    ...(stats !== undefined ? { keys: stats.keys, maxKeys: stats.maxKeys, evictions: stats.evictions, expired: stats.expired } : {}),
  };
}

/** One snapshot as sent to the page (JSON), ending with `second`; the store's health is read now. */
function snapshotJson(ctx: ServiceContext, aggregate: DashboardAggregate, second: SecondSnapshot, clients: number, readiness: Readiness | undefined): string {
  const health = ctx.limiter.health();
  return JSON.stringify({
    t: second.t,
    intervalMs: SNAPSHOT_INTERVAL_MS,
    uptimeMs: Date.now() - ctx.startedAt,
    clients,
    ready: readiness?.ready,
    second,
    totals: aggregate.totals,
    rules: aggregate.listedRules(),
    topRules: aggregate.topRules(),
    topKeys: aggregate.topKeys(),
    rulesInfo: rulesInfo(ctx),
    store: storeInfo(ctx, aggregate, readiness, health.breaker),
    health: healthInfo(health, { memory: ctx.store.name === 'memory', startedAt: ctx.startedAt, now: Date.now() }),
  });
}

const hashOf = (text: string): string => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/** GET /dashboard: the page, with a CSP that allows exactly its inline style and script (by hash). */
function routeDashboardPage(routes: HttpRoutes): void {
  const html = dashboardHtml();
  const csp = [
    "default-src 'none'",
    `script-src ${hashOf(DASHBOARD_SCRIPT)}`,
    `style-src ${hashOf(DASHBOARD_STYLE)}`,
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  routes.add('GET', '/dashboard', (_request, response) => {
    response.writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'content-length': Buffer.byteLength(html),
      'content-security-policy': csp,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-store',
    });
    response.end(html);
  });
}

/** GET /v1/events: the recent history at once, then a snapshot a second (written by the timer). */
function routeEventStream(
  routes: HttpRoutes,
  clients: EventStreamClients,
  aggregate: DashboardAggregate,
  readiness: ReadinessProbe,
  snapshot: (second: SecondSnapshot) => string,
): void {
  routes.add('GET', '/v1/events', (request, response) => {
    if (clients.size >= MAX_CLIENTS) {
      sendJson(response, 503, new HttpError(503, `there are already ${clients.size} event streams, at most ${MAX_CLIENTS} at once; close one and retry`).body(), { 'retry-after': '5' });
      return;
    }
    const client: Client = { request, response };
    clients.add(client);
    request.socket.setNoDelay(true);
    request.socket.setKeepAlive(true);
    response.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    response.write(`retry: 2000\n\nevent: history\ndata: ${JSON.stringify(aggregate.recentHistory())}\n\n`);
    const last = aggregate.recentHistory().at(-1);
    if (last !== undefined) response.write(`event: snapshot\ndata: ${snapshot(last)}\n\n`);
    readiness.refresh();
    const gone = (): void => clients.drop(client);
    request.on('close', gone);
    response.on('close', gone);
    response.on('error', gone);
  });
}

/** Serves the dashboard and its event stream. */
export function attachDashboard(ctx: ServiceContext, routes: HttpRoutes): { close(): void } {
  const aggregate = new DashboardAggregate(ctx);
  const unsubscribe = listenToEvents(ctx, {
    check: (event) => aggregate.onCheck(event),
    rejected: (event) => aggregate.onRejected(event),
    storeError: (event) => aggregate.onStoreError(event),
  });
  const clients = new EventStreamClients();
  const readiness = new ReadinessProbe(ctx);
  const snapshot = (second: SecondSnapshot): string => snapshotJson(ctx, aggregate, second, clients.size, readiness.latest);

  // Every second closes, whether anyone watches or not; the snapshot is built once for all clients.
  const tick = (): void => {
    const second = aggregate.roll(Date.now());
    if (clients.size === 0) return;
    // Readiness is probed only while someone is watching.
    readiness.refresh();
    clients.broadcast(`event: snapshot\ndata: ${snapshot(second)}\n\n`);
  };
  const timer = setInterval(tick, SNAPSHOT_INTERVAL_MS);
  timer.unref();

  routeDashboardPage(routes);
  routeEventStream(routes, clients, aggregate, readiness, snapshot);

  return {
    close: () => {
      clearInterval(timer);
      unsubscribe();
      clients.dropAll();
    },
  };
}
