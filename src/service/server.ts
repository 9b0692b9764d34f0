/**
 * `tollgate serve`: the decision service. Wires the store (memory, Redis or Redis Cluster), the
 * rules (files with hot reload, pushes through Redis), the listeners (decisions over HTTP and gRPC;
 * the admin plane, planes.ts), metrics and the dashboard. Starts with Redis down and follows its connection (store-link.ts); on SIGTERM
 * drains (not ready, still serving for the drain delay), then stops accepting, lets in-flight
 * requests finish and closes Redis last.
 */
import { EventEmitter } from 'node:events';
import type { AddressInfo } from 'node:net';
import { pino, type Logger } from 'pino';
import type { Registry } from 'prom-client';
import { InvalidOptionError } from '../errors.js';
import { createLimiter } from '../rules/create-limiter.js';
import { loadRules } from '../rules/load.js';
import { RulesHolder } from '../rules/ruleset.js';
import { RulesSync } from '../rules/shared/sync.js';
import { OverridesSync } from '../rules/shared/override-sync.js';
import { watchRules, type RulesWatcher } from '../rules/watch.js';
import { memoryStore, type MemoryStore } from '../store/memory.js';
import { redisStore, type RedisStore } from '../store/redis/store.js';
import { memcachedRefusal, memcachedStore, type MemcachedStore } from '../store/memcached/store.js';
import type { RateLimitConfig } from '../rules/types.js';
import { AuditLog } from './admin/audit.js';
import { BlockList, shareBlocks } from './check/blocks.js';
import type { ServiceContext, ServiceEvents } from './context.js';
import { startGrpcServer, type GrpcServer } from './grpc/listener.js';
import { createHttpServer, flushClientGone, type HttpServer } from './http/listener.js';
import { followConnections } from './http/close.js';
import { buildPlanes } from './admin/planes.js';
import { TlsReloader, secureServer } from './http/tls.js';
import { isLoopback } from './http/listener-options.js';
import { breakerCheck, logStoreHealth } from './health/store-health.js';
import type { ServiceOptions } from './options.js';
import { DrainState, evaluateReadiness, rulesCheck, type ReadinessCheck } from './health/readiness.js';
import { RulesSyncStarter, StoreLink, probeAddress } from './health/store-link.js';
import { listenerUrl, removeAddressFile, writeAddressFile } from './health/address-file.js';

/** A running service. */
export interface RunningService {
  /** The decision listener's port (undefined without one: the gateway runs the admin plane only). */
  readonly httpPort: number | undefined;
  /** The admin listener's port (dashboard, metrics, events, rules, admin API). */
  readonly adminPort: number;
  readonly grpcPort: number | undefined;
  readonly context: ServiceContext;
  /** The registry GET /metrics prints: embedders (the gateway) add their own families to it. */
  readonly registry: Registry;
  /** The certificate files in force and their reloads (with TLS): embedders (the gateway) serve them on listeners of their own. */
  readonly tls: TlsReloader | undefined;
  /** Graceful, at once: stops accepting, lets in-flight requests finish (up to --shutdown-timeout), closes the store. */
  close(): Promise<void>;
  /**
   * SIGTERM: not ready at once, still serving for --drain-delay, then {@link close}. Called again
   * while draining, skips the rest of the delay. Resolves once stopped.
   */
  drain(): Promise<void>;
}

/** JSON logs, or readable ones when a person is watching a terminal. */
export function createLogger(level: string): Logger {
  if (process.stdout.isTTY) return pino({ level, transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } });
  return pino({ level });
}

/**
 * How long a Redis command may stay out: a few deadlines. A reply later than the deadline is no
 * use to the check (the failure mode answered it), so the connection lets the command go soon after.
 */
function commandTimeout(options: ServiceOptions): number {
  return Math.max(200, options.deadlineMs * 4);
}

/** The stores `serve` runs on. */
type ServiceStore = MemoryStore | RedisStore | MemcachedStore;

/**
 * The memory store, or Redis (single node, Cluster or Sentinel; connecting in the background: see
 * StoreLink), or memcached (started down, it is connected again by itself).
 */
async function createStoreFromOptions(options: ServiceOptions, logger: Logger): Promise<ServiceStore> {
  if (options.memcached !== undefined) {
    const memcached = memcachedStore({ servers: options.memcached.map(({ host, port }) => `${host}:${port}`), commandTimeoutMs: commandTimeout(options) });
    await memcached.ready().catch((error: unknown) => logger.warn({ err: error }, 'memcached does not answer yet: checks are decided by the failure mode until it does'));
    return memcached;
  }
  const store: ServiceStore =
    options.redis !== undefined
      ? redisStore({ url: options.redis, commandTimeoutMs: commandTimeout(options) })
      : options.redisCluster !== undefined
        ? redisStore({ cluster: options.redisCluster, commandTimeoutMs: commandTimeout(options) })
        : options.redisSentinel !== undefined
          ? redisStore({ sentinels: options.redisSentinel.nodes, name: options.redisSentinel.name, commandTimeoutMs: commandTimeout(options) })
          : memoryStore({ maxKeys: options.maxKeys });
  return store;
}

/** The rules of --config, or empty ones (rules may still be pushed through Redis). */
async function loadInitialRules(options: ServiceOptions, clock: (() => number) | undefined): Promise<RulesHolder> {
  // The holder's clock is the decisions' clock: an override expires by the time checks are decided at.
  return new RulesHolder(options.config !== undefined ? await loadRules(options.config, { mergeDomains: options.mergeDomains, refuse: storeRefusal(options) }) : undefined, clock !== undefined ? { clock } : {});
}

/** The limits the service's store cannot keep (memcached's: sliding-log, share, local-first), refused with the rules at load. */
function storeRefusal(options: ServiceOptions): ((limit: RateLimitConfig) => string | undefined) | undefined {
  if (options.memcached === undefined) return undefined;
  return (limit) => {
    const why = memcachedRefusal({ algorithm: limit.algorithm, share: limit.share, syncIntervalMs: limit.syncIntervalMs });
    return why === undefined ? undefined : `${why}; examples/memcached/ holds rules that memcached keeps`;
  };
}

/** Reloads the rules when their files change (when they come from files). */
function watchRuleFiles(options: ServiceOptions, holder: RulesHolder, logger: Logger): RulesWatcher | undefined {
  if (options.config === undefined) return undefined;
  return watchRules(options.config, holder, {
    mergeDomains: options.mergeDomains,
    refuse: storeRefusal(options),
    onError: (error) => logger.error({ err: error }, 'rules reload refused; the last good rules stay in force'),
    onWarning: (message) => logger.warn(message),
    onReload: (version) => logger.info({ version }, 'rules loaded'),
  });
}

/** Follows the Redis connection (with a Redis store only); waits for the first attempt's outcome. */
async function linkStore(store: ServiceStore, options: ServiceOptions, logger: Logger, events: EventEmitter<ServiceEvents>): Promise<StoreLink | undefined> {
  if (store.name !== 'redis') return undefined;
  const probe = options.redis !== undefined ? probeAddress(options.redis) : undefined;
  const link = new StoreLink(store as RedisStore, { logger, probe, onChange: () => events.emit('readiness') });
  await link.start(5_000);
  return link;
}

/** Applies rules pushed through Redis (with a Redis store only), from when Redis answers. */
async function startRulesSync(store: ServiceStore, link: StoreLink | undefined, holder: RulesHolder, logger: Logger): Promise<{ sync: RulesSync; starter: RulesSyncStarter } | undefined> {
  if (store.name !== 'redis' || link === undefined) return undefined;
  const sync = new RulesSync({
    redis: (store as RedisStore).client,
    holder,
    onError: (error) => logger.error({ err: error }, 'a stored rules document was refused and skipped; the other domains apply'),
    onWarning: (message) => logger.warn(message),
    onApply: (version) => logger.info({ version }, 'pushed rules applied'),
  });
  const starter = new RulesSyncStarter(sync, link, logger);
  // Redis up: the pushed rules are in force before the listeners open; down: they follow.
  await starter.kick();
  return { sync, starter };
}

/** Applies per-tenant overrides put through Redis (with a Redis store only), as pushed rules are. */
async function startOverridesSync(store: ServiceStore, link: StoreLink | undefined, holder: RulesHolder, logger: Logger, clock: (() => number) | undefined): Promise<{ sync: OverridesSync; starter: RulesSyncStarter } | undefined> {
  if (store.name !== 'redis' || link === undefined) return undefined;
  const sync = new OverridesSync({
    redis: (store as RedisStore).client,
    holder,
    ...(clock !== undefined ? { clock } : {}),
    onError: (error) => logger.error({ err: error }, 'a stored override was refused and skipped; the others apply'),
    onWarning: (message) => logger.warn(message),
    onApply: (version) => logger.info({ version, overrides: holder.overrides().length }, 'overrides applied'),
  });
  const starter = new RulesSyncStarter(sync, link, logger, 'overrides');
  await starter.kick();
  return { sync, starter };
}

/** Without --config (and no rules pushed through Redis yet), every check answers OK: say so at start. */
function warnIfNoRules(options: ServiceOptions, holder: RulesHolder, store: ServiceStore, logger: Logger): void {
  if (options.config !== undefined || holder.current.domainNames().length > 0) return;
  const until = store.name === 'redis' ? ' until rules are pushed (PUT /v1/rules)' : '';
  const hint = options.rulesHint ?? { missing: 'no --config (or TOLLGATE_CONFIG) given', fix: 'give --config FILE|DIR (docs/rules.md)' };
  logger.warn(`${hint.missing}: no rules are loaded, so nothing is limited and every check answers OK${until}; ${hint.fix}`);
}

/** What buildContext needs beyond what it makes (the limiter, the events, the block list). */
interface ContextParts {
  readonly options: ServiceOptions;
  readonly logger: Logger;
  readonly store: ServiceStore;
  readonly holder: RulesHolder;
  readonly watcher: RulesWatcher | undefined;
  readonly sync: RulesSync | undefined;
  readonly overrides: OverridesSync | undefined;
  readonly startedAt: number;
  readonly events: EventEmitter<ServiceEvents>;
  /** The decisions' clock, when the embedding program gives one (else the store's time). */
  readonly clock: (() => number) | undefined;
  readonly drain: DrainState;
  /** Readiness: add a condition here. */
  readonly checks: readonly ReadinessCheck[];
}

function buildContext({ options, logger, store, holder, watcher, sync, overrides, startedAt, events, drain, checks, clock }: ContextParts): ServiceContext {
  return {
    options,
    logger,
    limiter: createLimiter({
      store,
      rules: holder,
      ...(clock !== undefined ? { clock } : {}),
      failureMode: options.failureMode,
      expectedNodes: options.expectedNodes,
      deadlineMs: options.deadlineMs,
      overLimitCache: options.localCacheKeys === 0 ? false : { maxKeys: options.localCacheKeys },
    }),
    store,
    holder,
    watcher,
    sync,
    overrides,
    events,
    blocks: new BlockList(),
    audit: new AuditLog(logger, clock ?? Date.now),
    startedAt,
    clock: clock ?? Date.now,
    panels: new Map(),
    lifecycle: drain,
    readiness: () => Promise.resolve(evaluateReadiness(checks)),
  };
}

/** The conditions of readiness, in /readyz's order. */
function readinessChecks(holder: RulesHolder, watcher: RulesWatcher | undefined, store: ServiceStore, link: StoreLink | undefined, drain: DrainState): ReadinessCheck[] {
  return [
    rulesCheck(holder, watcher),
    link?.check() ?? { name: 'store', check: () => storeReadiness(store) },
    drain.check(),
  ];
}

/** Ready with the memory store; with memcached, while every server is connected. */
function storeReadiness(store: ServiceStore): { ready: boolean; details: Record<string, unknown> } {
  if (store.name !== 'memcached') return { ready: true, details: { store: store.name } };
  const { connected, servers } = (store as MemcachedStore).health();
  return { ready: connected === servers, details: { store: store.name, address: (store as MemcachedStore).address, connected, servers } };
}

/** One HTTP listener, and the way to close it without dropping an accepted request (http/close.ts). */
interface HttpListener {
  readonly server: HttpServer;
  readonly connections: ReturnType<typeof followConnections>;
}

function httpListener(server: HttpServer): HttpListener {
  return { server, connections: followConnections(server) };
}

/** Listens on `host:port`; resolves with the port (the one given, or the one chosen for 0). */
async function listenHttp(server: HttpServer, host: string, port: number, what: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(new InvalidOptionError(`${what} cannot listen on ${host}:${port}: ${error.code === 'EADDRINUSE' ? 'the port is in use' : error.message}`)),
    );
    server.listen(port, host, () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

/** What runs once the HTTP servers are made, and must be closed. */
interface ServiceParts {
  readonly context: ServiceContext;
  /** The decision listener (none in the gateway) and the admin listener. */
  readonly listeners: { readonly decision: HttpListener | undefined; readonly admin: HttpListener };
  readonly metrics: { readonly registry: Registry; close(): void };
  readonly dashboard: { close(): void };
  readonly link: StoreLink | undefined;
  readonly starter: RulesSyncStarter | undefined;
  readonly overridesStarter?: RulesSyncStarter | undefined;
  /** Follows the certificate files (with TLS). */
  readonly tls: TlsReloader | undefined;
}

/** Closes the rules watcher and sync, metrics, the dashboard and the store link, then the store. */
async function closeRest({ context, metrics, dashboard, link, starter, overridesStarter, tls }: ServiceParts): Promise<void> {
  tls?.close();
  context.watcher?.close();
  metrics.close();
  dashboard.close();
  starter?.close();
  overridesStarter?.close();
  await context.sync?.close();
  await context.overrides?.close();
  link?.close();
  await context.audit.close();
  await context.limiter.close();
}

/** A listener could not start: closes what already runs, so the process can exit, and throws `error`. */
async function abandon(parts: ServiceParts, error: unknown): Promise<never> {
  parts.listeners.decision?.server.close();
  parts.listeners.admin.server.close();
  await closeRest(parts);
  throw error;
}

/** Stops accepting, lets in-flight requests finish, then closes the rest and the store last. */
async function shutDown(parts: ServiceParts, grpc: GrpcServer | undefined): Promise<void> {
  const { context, listeners } = parts;
  const started = Date.now();
  const timeoutMs = context.options.shutdownTimeoutMs;
  // Listeners closing: a health check reading the address file fails from now on.
  if (context.options.addressFile !== undefined) removeAddressFile(context.options.addressFile);
  // Event streams never finish on their own: end them first so the server can close at once.
  parts.dashboard.close();
  await Promise.all([listeners.decision?.connections.close(timeoutMs, context.logger), listeners.admin.connections.close(timeoutMs, context.logger), grpc?.close(timeoutMs)]);
  flushClientGone(context);
  await closeRest(parts);
  context.logger.info({ closingMs: Date.now() - started, drainedMs: Date.now() - (context.lifecycle.drainingSince ?? started) }, 'stopped');
}

/**
 * Opens the admin listener, then the decision listener (so the admin plane is up once `HTTP
 * listening` is logged), then gRPC; on a failure closes what runs and throws.
 */
async function openListeners(parts: ServiceParts, hooks: ServiceHooks): Promise<{ httpPort: number | undefined; adminPort: number; grpc: GrpcServer | undefined }> {
  const { context, listeners } = parts;
  const { options, logger } = context;
  const adminPort = await listenHttp(listeners.admin.server, options.adminHost, options.adminPort, 'the admin listener').catch((error: unknown) => abandon(parts, error));
  logger.info({ port: adminPort }, `Admin listening on ${options.adminHost}:${adminPort} (dashboard, metrics, rules, admin API)`);
  if (options.adminPublic && options.metricsToken === undefined && !isLoopback(options.adminHost)) {
    logger.warn({ adminBind: options.adminHost }, `--admin-public: the dashboard, /metrics and /v1/events (callers' addresses and ids) answer anyone who reaches ${options.adminHost}:${adminPort}, without a token`);
  }
  let httpPort: number | undefined;
  if (listeners.decision !== undefined) {
    httpPort = await listenHttp(listeners.decision.server, options.host, options.port, 'HTTP').catch((error: unknown) => abandon(parts, error));
    logger.info({ port: httpPort, store: context.store.name, rules: context.holder.current.version }, `HTTP listening on ${options.host}:${httpPort}`);
  }
  const grpc = hooks.grpc === false ? undefined : await startGrpcServer(context, options.host, options.grpcPort, parts.tls).catch((error: unknown) =>
    abandon(parts, error instanceof Error && !(error instanceof InvalidOptionError) ? new InvalidOptionError(error.message) : error),
  );
  if (grpc !== undefined) logger.info({ port: grpc.port }, `gRPC listening on ${options.host}:${grpc.port}`);
  return { httpPort, adminPort, grpc };
}

/** `--address-file`: where the listeners are, for `tollgate health`; a path that cannot be written stops the start. */
async function publishAddresses(parts: ServiceParts, ports: { httpPort: number | undefined; adminPort: number; grpc: GrpcServer | undefined }): Promise<void> {
  const { options } = parts.context;
  if (options.addressFile === undefined) return;
  const tls = options.tls !== undefined;
  try {
    writeAddressFile(options.addressFile, {
      pid: process.pid,
      ...(ports.httpPort !== undefined ? { http: listenerUrl(options.host, ports.httpPort, tls) } : {}),
      admin: listenerUrl(options.adminHost, ports.adminPort, tls),
      ...(ports.grpc !== undefined ? { grpc: new URL(listenerUrl(options.host, ports.grpc.port, tls)).host } : {}),
      clientCertificates: options.tls?.clientCa !== undefined,
    });
  } catch (error) {
    await shutDown(parts, ports.grpc);
    throw error;
  }
}

/** What an embedding program (or a test) may give the service beyond its options. */
export interface ServiceHooks {
  /** The clock (epoch ms) every decision reads instead of the store's: replays and tests. */
  readonly clock?: () => number;
  /** false: no gRPC listener (`tollgate gateway` runs the service for its admin port only). Default true. */
  readonly grpc?: boolean;
  /** false: no decision listener, the admin plane only (`tollgate gateway`: its proxy decides). Default true. */
  readonly decisions?: boolean;
}

/** Starts the service; resolves once every listener is up. */
export async function startService(options: ServiceOptions, logger: Logger = createLogger(options.logLevel), hooks: ServiceHooks = {}): Promise<RunningService> {
  const startedAt = Date.now();
  // First: a certificate problem stops the start (exit 2) before anything opens.
  const tls = options.tls === undefined ? undefined : new TlsReloader(options.tls, logger);
  const store = await createStoreFromOptions(options, logger);
  const holder = await loadInitialRules(options, hooks.clock);
  const events = new EventEmitter<ServiceEvents>();
  const link = await linkStore(store, options, logger, events);
  const watcher = watchRuleFiles(options, holder, logger);
  const pushed = await startRulesSync(store, link, holder, logger);
  const overriding = await startOverridesSync(store, link, holder, logger, hooks.clock);
  warnIfNoRules(options, holder, store, logger);
  const drain = new DrainState();
  const checks = readinessChecks(holder, watcher, store, link, drain);
  const context = buildContext({ options, logger, store, holder, watcher, sync: pushed?.sync, overrides: overriding?.sync, startedAt, events, drain, checks, clock: hooks.clock });
  logStoreHealth(context);
  shareBlocks(context.blocks, options.workers);
  checks.push(breakerCheck(context.limiter, () => events.emit('readiness')));

  const planes = buildPlanes(context);
  const listeners = {
    decision: hooks.decisions === false ? undefined : httpListener(secureServer(tls, true, (secure) => createHttpServer(context, planes.decision, secure))),
    admin: httpListener(secureServer(tls, false, (secure) => createHttpServer(context, planes.admin, secure))),
  };
  tls?.watch();
  const parts: ServiceParts = { context, listeners, metrics: planes.metrics, dashboard: planes.dashboard, link, starter: pushed?.starter, overridesStarter: overriding?.starter, tls };
  const { httpPort, adminPort, grpc } = await openListeners(parts, hooks);
  await publishAddresses(parts, { httpPort, adminPort, grpc });

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    if (!drain.draining) {
      void drain.begin(0);
      events.emit('readiness');
    }
    return (closing ??= shutDown(parts, grpc));
  };
  const drainThenClose = async (): Promise<void> => {
    if (closing !== undefined || drain.draining) {
      drain.skipDelay();
    } else {
      const delay = drain.begin(options.drainDelayMs);
      events.emit('readiness');
      logger.info({ drainDelayMs: options.drainDelayMs }, `draining: /readyz answers 503 and requests are still served for ${options.drainDelayMs} ms, then the listeners close`);
      await delay;
    }
    return close();
  };
  return { httpPort, adminPort, grpcPort: grpc?.port, context, registry: parts.metrics.registry, tls, close, drain: drainThenClose };
}
