/**
 * `on_limit: defer` at the gateway: one Redis connection of its own (blocking stream reads must not
 * share the decisions' short command timeout), a queue per defer route, and a drain worker per
 * queue. A worker admits each stored request through the same decision path as live traffic
 * (`decideCheck` on the route's descriptors, computed from the stored request), so replays share the
 * rule's quota with live requests, and delivers it to the route's current upstream.
 */
import { once } from 'node:events';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Cluster, Redis } from 'ioredis';
import { openClient } from '../../store/redis/connect.js';
import { decideCheck, type ServiceOptions } from '../../service/index.js';
import type { CheckResult } from '../../rules/check.js';
import { MAX_DEFER_BODY } from './config.js';
import { createDeferredQueue, startDrainWorker, upstreamDeliverer, type Admission, type DeferredEntry, type DeferredQueue, type DeliveryResponse, type DrainWorker, type TicketStatus } from './index.js';
import { deferMetrics, type DeferMetricHooks } from './metrics.js';
import type { DeferralPort, GatewayRoute, GatewayState } from '../state.js';
import { GatewayRequest } from '../request.js';
import { deliveryHeaders, replayFacts } from './replay.js';
import { descriptorsOf } from '../routes.js';

/** How often a drain worker's repeated errors are logged (the rest are counted in the next line). */
const WORKER_ERROR_LOG_MS = 10_000;

const ALLOWED: Admission = { allowed: true, retryAfterMs: 0 };
/** A blocking read waits at most a second; commands get ten. */
const COMMAND_TIMEOUT_MS = 10_000;
/** How long the queue's connection may take to open before a worker's errors are news. */
const CONNECT_TIMEOUT_MS = 5_000;

/** Whether the service's options name a Redis (a defer route needs one). */
export function hasRedis(options: ServiceOptions): boolean {
  return options.redis !== undefined || options.redisCluster !== undefined || options.redisSentinel !== undefined;
}

/** Why a defer route cannot run on the memory store. */
export function deferNeedsRedis(): string {
  return 'on_limit: defer keeps throttled requests in Redis: start the gateway with --redis URL, --redis-cluster or --redis-sentinel (the memory store has no queue)';
}

/** The longest wait an over-limit check asks for: each denying limit's `retryAfter` (its real refill), at least 1 ms. */
export function retryWait(result: CheckResult): number {
  let wait = 0;
  for (const status of result.statuses) if (status.code === 'OVER_LIMIT') wait = Math.max(wait, status.retryAfter ?? status.durationUntilReset);
  return Math.max(1, wait);
}

/** The deferred queues and drain workers of one gateway process. */
export class GatewayDeferral implements DeferralPort {
  /** This process's name in every queue's consumer group. */
  readonly consumer = `${hostname().replace(/[^A-Za-z0-9_.:-]/g, '_').slice(0, 100)}-${process.pid}`;
  private client: Redis | Cluster | undefined;
  /** Whether the connection has been up once (a worker's error before that is the start's, not news). */
  private everConnected = false;
  private readonly queues = new Map<string, DeferredQueue>();
  private readonly workers = new Map<string, { readonly fingerprint: string; readonly worker: DrainWorker }>();
  /** The current defer route of each queue: workers read it at each attempt, so a reload takes effect at once. */
  private readonly routes = new Map<string, GatewayRoute>();
  private state: GatewayState | undefined;
  private statusReader: DeferredQueue | undefined;
  private readonly metrics: DeferMetricHooks;

  constructor(private readonly options: ServiceOptions, registry: Registry, readonly logger: Logger) {
    this.metrics = deferMetrics(registry);
  }

  private redis(): Redis | Cluster {
    if (this.client !== undefined) return this.client;
    const { redis: url, redisCluster: cluster, redisSentinel: sentinel } = this.options;
    const where = url !== undefined ? { url } : cluster !== undefined ? { cluster } : { sentinels: sentinel!.nodes, name: sentinel!.name };
    this.client = openClient(where, { commandTimeout: COMMAND_TIMEOUT_MS, connectTimeout: CONNECT_TIMEOUT_MS }).client;
    this.client.once('ready', () => (this.everConnected = true));
    this.client.on('error', (error: Error) => this.logger.debug({ err: error.message }, 'deferred queue: Redis connection error'));
    return this.client;
  }

  /** The queue of a defer route (one object per queue name and result lifetime). */
  queue(route: GatewayRoute): DeferredQueue {
    const settings = route.defer!;
    const id = `${settings.queue}|${settings.resultTtlMs}`;
    let queue = this.queues.get(id);
    if (queue === undefined) {
      queue = createDeferredQueue({ redis: this.redis(), maxLength: settings.maxLength, maxBodyBytes: MAX_DEFER_BODY, resultTtlMs: settings.resultTtlMs, hooks: this.metrics.queue });
      this.queues.set(id, queue);
    }
    return queue;
  }

  /** Where a ticket stands (any queue of ours: a ticket names its queue). */
  status(ticket: string): Promise<TicketStatus> {
    if (this.statusReader === undefined) this.statusReader = createDeferredQueue({ redis: this.redis() });
    return this.statusReader.status(ticket);
  }

  /** Starts the workers of new defer routes, stops those of removed ones, restarts those whose settings changed. */
  sync(state: GatewayState): Promise<void> {
    this.state = state;
    this.routes.clear();
    for (const route of state.routes) if (route.defer !== undefined) this.routes.set(route.defer.queue, route);
    const stopping: Promise<void>[] = [];
    for (const [name, running] of this.workers) {
      const route = this.routes.get(name);
      if (route !== undefined && JSON.stringify(route.defer) === running.fingerprint) continue;
      this.workers.delete(name);
      stopping.push(running.worker.stop());
    }
    for (const [name, route] of this.routes) if (!this.workers.has(name)) this.workers.set(name, { fingerprint: JSON.stringify(route.defer), worker: this.startWorker(route) });
    return Promise.all(stopping).then(() => undefined);
  }

  private startWorker(route: GatewayRoute): DrainWorker {
    const settings = route.defer!;
    return startDrainWorker({
      queue: this.queue(route),
      queueName: settings.queue,
      consumer: this.consumer,
      admit: (entry) => this.admit(entry),
      deliver: (entry, key, signal) => this.deliver(entry, key, signal),
      maxAttempts: settings.maxAttempts,
      minIdleMs: settings.reclaimAfterMs,
      hooks: { ...this.metrics.worker, error: this.workerErrorLog(settings.queue) },
    });
  }

  /**
   * Logs a drain worker's errors at most once per {@link WORKER_ERROR_LOG_MS}: while Redis is down
   * the worker retries every half second, and each retry must not be a line of its own.
   */
  private workerErrorLog(queue: string): (error: unknown) => void {
    let lastAt = -Infinity;
    let suppressed = 0;
    const startedAt = Date.now();
    return (error) => {
      const now = Date.now();
      // The connection is still being opened (the worker starts with the gateway, before Redis
      // answers): that is no news, unless it goes on past the connect timeout.
      if (!this.everConnected && now - startedAt < CONNECT_TIMEOUT_MS) {
        this.logger.debug({ err: error instanceof Error ? error.message : error, queue }, 'deferred queue: the drain worker waits for Redis');
        return;
      }
      if (now - lastAt < WORKER_ERROR_LOG_MS) {
        suppressed += 1;
        return;
      }
      lastAt = now;
      this.logger.warn({ err: error instanceof Error ? error.message : error, queue, suppressed }, 'deferred queue: the drain worker waits and tries again');
      suppressed = 0;
    };
  }

  /** The route's rate limits for the stored request, decided as a live request is: allowed, or when to ask again. */
  private async admit(entry: DeferredEntry): Promise<Admission> {
    const route = this.routes.get(entry.queueName);
    const state = this.state;
    if (route === undefined || state === undefined) return { allowed: false, retryAfterMs: 1_000 };
    if (route.domain === undefined) return ALLOWED;
    const descriptors = descriptorsOf(route.beforeLimits, route, new GatewayRequest(replayFacts(entry)), state);
    if (descriptors.length === 0) return ALLOWED;
    const result = await decideCheck(state.context, { domain: route.domain, descriptors }, 'gateway');
    return result.overallCode === 'OK' ? ALLOWED : { allowed: false, retryAfterMs: retryWait(result) };
  }

  /** Sends the stored request to the route's upstream as it is configured now, with the X-Forwarded-* a live forward carries. */
  private deliver(entry: DeferredEntry, ticket: string, signal: AbortSignal): Promise<DeliveryResponse> {
    const route = this.routes.get(entry.queueName);
    const upstreams = this.state?.upstreams;
    const origin = route === undefined ? undefined : upstreams?.origin(route.upstream);
    if (route === undefined || origin === undefined) return Promise.reject(new Error(`queue ${entry.queueName} has no defer route any more`));
    // Through the upstream's pool: its connections, and for https:// its CA and server name.
    const dispatcher = upstreams!.pool(route.upstream);
    return upstreamDeliverer(origin, { timeoutMs: route.timeoutMs, dispatcher })({ ...entry, headers: deliveryHeaders(entry) }, ticket, signal);
  }

  /**
   * Waits up to `timeoutMs` for the connection (opened by the first defer route), so requests
   * deferred right after the start are not answered 503; resolves either way (the workers ride out
   * a Redis that comes later).
   */
  async connected(timeoutMs: number): Promise<void> {
    const client = this.client;
    if (client === undefined || client.status === 'ready') return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([once(client, 'ready'), new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]).catch(() => undefined);
    clearTimeout(timer);
  }

  /** Stops every worker (entries in flight stay pending, to be reclaimed), then closes the connection. */
  async close(): Promise<void> {
    await Promise.all([...this.workers.values()].map(({ worker }) => worker.stop()));
    this.workers.clear();
    if (this.client !== undefined) await this.client.quit().catch(() => this.client?.disconnect());
  }
}
