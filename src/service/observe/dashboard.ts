/**
 * The live dashboard: GET /dashboard serves one self-contained page (dashboard-page.ts), fed by
 * Server-Sent Events from GET /v1/events. Decisions are aggregated in dashboard-aggregate.ts, in
 * memory bounded by constants, and one snapshot a second is built once and written to every
 * client, whatever the traffic. With `--workers N` the snapshot is the primary's merge of every
 * worker's counts (cluster/dashboard-merge.ts), with a row per worker.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { BreakerState } from '../../limiter/index.js';
import type { ServiceContext, SlotEvent } from '../context.js';
import { workerLink, type WorkerLink } from '../cluster/workers.js';
import { DashboardAggregate, TOP_N, type ListedRule, type SecondSnapshot, type Totals } from './dashboard-aggregate.js';
import { ClusterHistory, REPORTED_KEYS, type ClusterSecond, type DashboardReport, type WorkerRow } from '../cluster/dashboard-merge.js';
import { healthInfo } from './dashboard-health.js';
import { DASHBOARD_SCRIPT, DASHBOARD_STYLE, dashboardHtml } from './dashboard-page.js';
import type { HttpRoutes } from '../http/listener.js';
import { HttpError, sendJson } from '../http/body.js';
import type { LatencySummary } from './metric-tally.js';
import { CHECK_DURATION_BOUNDS, checkDurationOf, listenToEvents, memoryStats } from './metrics.js';
import { ruleIndex } from '../check/outcomes.js';

export { DashboardAggregate, HISTORY_SECONDS, KEY_SLOTS, MAX_RULES, OTHER_RULES, TopKeys } from './dashboard-aggregate.js';

/** How often a snapshot is sent, in ms. */
export const SNAPSHOT_INTERVAL_MS = 1_000;
/** Simultaneous event-stream clients; more get a 503. */
export const MAX_CLIENTS = 32;
/** A client whose unsent data passes this is dropped (it stopped reading). */
const MAX_BUFFERED_BYTES = 512 * 1024;

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
    overrides: overridesInfo(ctx),
  };
}

/** Overrides the dashboard lists (the first of them: the snapshot stays small). */
const LISTED_OVERRIDES = 20;

/** The overrides in force: how many, and the first {@link LISTED_OVERRIDES} with their limit, the rule each outranks and its expiry. */
function overridesInfo(ctx: ServiceContext): { total: number; listed: { id: string; requestsPerUnit: number; unit: string; shadows: string | null; expires: string | null }[] } {
  const all = ctx.holder.overrides();
  const listed = all.slice(0, LISTED_OVERRIDES).map((o) => ({ id: o.id, requestsPerUnit: o.rateLimit.requestsPerUnit ?? 0, unit: o.rateLimit.unlimited ? 'unlimited' : (o.rateLimit.unit ?? ''), shadows: o.shadows, expires: o.expires }));
  return { total: all.length, listed };
}

/** The counts a snapshot shows: this process's, or (`--workers N`) the merge of every worker's. */
interface SnapshotCounts {
  readonly second: SecondSnapshot;
  readonly totals: Totals;
  readonly rules: ListedRule[];
  readonly topRules: { rule: string; throttled: number; allowed: number }[];
  readonly topKeys: { key: string; throttled: number; error: number }[];
  readonly unknownDomains: [string, number][];
  readonly latency: LatencySummary | undefined;
  readonly clients: number;
  readonly storeErrorsLast10s: number;
  readonly workers?: WorkerRow[];
}

/** This process's counts, ending with `second`. */
function localCounts(aggregate: DashboardAggregate, second: SecondSnapshot, clients: number): SnapshotCounts {
  return {
    second,
    totals: aggregate.totals,
    rules: aggregate.listedRules(),
    topRules: aggregate.topRules(),
    topKeys: aggregate.topKeys(),
    unknownDomains: aggregate.unknownDomains.entries().slice(0, TOP_N),
    latency: aggregate.latencySummary(),
    clients,
    storeErrorsLast10s: aggregate.storeErrorsLast10s(),
  };
}

/**
 * The store part of a snapshot: its state (from readiness, the breaker and recent errors), fallback
 * and counters.
 */
function storeInfo(ctx: ServiceContext, aggregate: DashboardAggregate, counts: SnapshotCounts, readiness: Readiness | undefined, breaker: BreakerState): Record<string, unknown> {
  const stats = memoryStats(ctx);
  const errors10s = counts.storeErrorsLast10s;
  const details = readiness?.details ?? {};
  const reachable = typeof details.storeReachable === 'boolean' ? details.storeReachable : undefined;
  const { failureMode, expectedNodes } = ctx.options;
  return {
    name: ctx.store.name,
    state: reachable === false ? 'unreachable' : breaker !== 'closed' ? 'degraded' : errors10s > 0 ? 'errors' : readiness === undefined ? 'unknown' : 'ok',
    ...(reachable !== undefined ? { reachable } : {}),
    errorsLast10s: errors10s,
    errorsTotal: counts.totals.storeErrors,
    lastError: aggregate.lastStoreError ?? null,
    // What checks get while the store fails (rules may name their own failure_mode).
    // The nodes last counted sharing the store (heartbeats), never below --expected-nodes.
    fallback: failureMode === 'local' ? `local (limit / ${Math.max(expectedNodes, ctx.limiter.health().liveNodes ?? 1)})` : failureMode,
    ...(stats !== undefined ? { keys: stats.keys, maxKeys: stats.maxKeys, evictions: stats.evictions, expired: stats.expired } : {}),
  };
}

/** One snapshot as sent to the page (JSON); the store's health is this process's, read now. */
function snapshotJson(ctx: ServiceContext, aggregate: DashboardAggregate, counts: SnapshotCounts, readiness: Readiness | undefined): string {
  const health = ctx.limiter.health();
  return JSON.stringify({
    t: counts.second.t,
    intervalMs: SNAPSHOT_INTERVAL_MS,
    uptimeMs: Date.now() - ctx.startedAt,
    clients: counts.clients,
    ready: readiness?.ready,
    second: counts.second,
    totals: counts.totals,
    rules: counts.rules,
    topRules: counts.topRules,
    topKeys: counts.topKeys,
    unknownDomains: counts.unknownDomains,
    latency: counts.latency ?? null,
    workers: counts.workers ?? null,
    rulesInfo: rulesInfo(ctx),
    store: storeInfo(ctx, aggregate, counts, readiness, health.breaker),
    health: healthInfo(health, { memory: ctx.store.name === 'memory', startedAt: ctx.startedAt, now: Date.now() }),
    panels: ctx.panels === undefined || ctx.panels.size === 0 ? null : Object.fromEntries([...ctx.panels].map(([name, read]) => [name, read()])),
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

/** What a viewer that connects gets at once: the recent seconds, and the latest snapshot. */
interface StreamSource {
  history(): readonly SecondSnapshot[];
  latest(): string | undefined;
}

/** GET /v1/events: the recent history at once, then a snapshot a second (written by the timer). */
function routeEventStream(routes: HttpRoutes, clients: EventStreamClients, source: StreamSource, readiness: ReadinessProbe): void {
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
    response.write(`retry: 2000\n\nevent: history\ndata: ${JSON.stringify(source.history())}\n\n`);
    const latest = source.latest();
    if (latest !== undefined) response.write(`event: snapshot\ndata: ${latest}\n\n`);
    readiness.refresh();
    const gone = (): void => clients.drop(client);
    request.on('close', gone);
    response.on('close', gone);
    response.on('error', gone);
  });
}

/** What this worker reports to the primary for the merged dashboard (`--workers N`). */
function dashboardReport(ctx: ServiceContext, aggregate: DashboardAggregate, clients: number): DashboardReport {
  const health = ctx.limiter.health();
  return {
    totals: aggregate.liveTotals(),
    rules: [...aggregate.allRules()],
    keys: aggregate.topKeys(REPORTED_KEYS),
    unknownDomains: aggregate.unknownDomains.entries(),
    fallbacks: health.fallbacks,
    latency: aggregate.latency?.window() ?? [],
    breaker: health.breaker,
    clients,
    storeErrorsLast10s: aggregate.storeErrorsLast10s(),
  };
}

/**
 * `--workers N`: this worker reports its counts to the primary, and shows the merged second the
 * primary sends back (to its viewers, at once). Returns the merged seconds heard so far.
 */
function followCluster(link: WorkerLink, report: () => DashboardReport, show: (merged: ClusterSecond) => void): { history: ClusterHistory; stop(): void } {
  const history = new ClusterHistory();
  link.produce('dashboard', report);
  const stop = link.onDashboardSecond((data) => {
    const merged = data as ClusterSecond;
    history.add(merged);
    show(merged);
  });
  return { history, stop };
}

/** Serves the dashboard and its event stream. */
export function attachDashboard(ctx: ServiceContext, routes: HttpRoutes): { close(): void } {
  const zeros = (): number[] => new Array<number>(CHECK_DURATION_BOUNDS.length + 1).fill(0);
  const aggregate = new DashboardAggregate(ctx, { bounds: CHECK_DURATION_BOUNDS, counts: () => checkDurationOf(ctx)?.bucketCounts() ?? zeros() });
  const unsubscribe = listenToEvents(ctx, {
    check: (event) => aggregate.onCheck(event),
    rejected: (event) => aggregate.onRejected(event),
    storeError: (event) => aggregate.onStoreError(event),
  });
  const onSlot = (event: SlotEvent): void => aggregate.onSlot(event);
  ctx.events.on('slot', onSlot);
  const clients = new EventStreamClients();
  const readiness = new ReadinessProbe(ctx);
  const snapshot = (counts: SnapshotCounts): string => snapshotJson(ctx, aggregate, counts, readiness.latest);
  const broadcast = (counts: SnapshotCounts): void => {
    if (clients.size === 0) return;
    // Readiness is probed only while someone is watching.
    readiness.refresh();
    clients.broadcast(`event: snapshot\ndata: ${snapshot(counts)}\n\n`);
  };
  const link = workerLink(ctx.options.workers);
  const cluster = link === undefined ? undefined : followCluster(link, () => dashboardReport(ctx, aggregate, clients.size), broadcast);

  // Every second closes, whether anyone watches or not; the snapshot is built once for all clients.
  // With workers, the merged second the primary sends is what viewers see.
  const timer = setInterval(() => {
    const second = aggregate.roll(Date.now());
    if (cluster === undefined) broadcast(localCounts(aggregate, second, clients.size));
  }, SNAPSHOT_INTERVAL_MS);
  timer.unref();

  routeDashboardPage(routes);
  const source: StreamSource =
    cluster === undefined
      ? { history: () => aggregate.recentHistory(), latest: () => mapDefined(aggregate.recentHistory().at(-1), (last) => snapshot(localCounts(aggregate, last, clients.size))) }
      : { history: () => cluster.history.history(), latest: () => mapDefined(cluster.history.latest, snapshot) };
  routeEventStream(routes, clients, source, readiness);

  return {
    close: () => {
      clearInterval(timer);
      unsubscribe();
      ctx.events.off('slot', onSlot);
      cluster?.stop();
      clients.dropAll();
    },
  };
}

function mapDefined<T, R>(value: T | undefined, map: (value: T) => R): R | undefined {
  return value === undefined ? undefined : map(value);
}
