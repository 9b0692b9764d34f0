/**
 * `tollgate serve`: the decision service. Wires the store (memory, Redis or Redis Cluster), the
 * rules (files with hot reload, pushes through Redis), the HTTP and gRPC listeners, metrics and
 * the dashboard; shuts down gracefully (stop accepting, finish in-flight checks, close Redis).
 */
import { EventEmitter } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino, type Logger } from 'pino';
import { InvalidOptionError } from '../errors.js';
import { createLimiter } from '../rules/limiter.js';
import { loadRules } from '../rules/load.js';
import { RulesHolder } from '../rules/ruleset.js';
import { RulesSync } from '../rules/sync.js';
import { watchRules, type RulesWatcher } from '../rules/watch.js';
import { memoryStore, type MemoryStore } from '../store/memory.js';
import { redisStore, type RedisStore } from '../store/redis/store.js';
import { BlockList } from './blocks.js';
import type { ServiceContext, ServiceEvents } from './context.js';
import { attachDashboard } from './dashboard.js';
import { startGrpcServer, type GrpcServer } from './grpc.js';
import { createHttpServer } from './http.js';
import { attachMetrics } from './metrics.js';
import { logStoreHealth } from './store-health.js';
import type { ServiceOptions } from './options.js';

/** A running service. */
export interface RunningService {
  readonly httpPort: number;
  readonly grpcPort: number | undefined;
  readonly context: ServiceContext;
  /** Graceful: stops accepting, lets in-flight requests finish, closes the store. */
  close(): Promise<void>;
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

/** The memory store, or Redis (single node, Cluster or Sentinel) once it answers. */
async function createStoreFromOptions(options: ServiceOptions): Promise<MemoryStore | RedisStore> {
  const store: MemoryStore | RedisStore =
    options.redis !== undefined
      ? redisStore({ url: options.redis, commandTimeoutMs: commandTimeout(options) })
      : options.redisCluster !== undefined
        ? redisStore({ cluster: options.redisCluster, commandTimeoutMs: commandTimeout(options) })
        : options.redisSentinel !== undefined
          ? redisStore({ sentinels: options.redisSentinel.nodes, name: options.redisSentinel.name, commandTimeoutMs: commandTimeout(options) })
          : memoryStore();
  if (store.name === 'redis') await (store as RedisStore).ready();
  return store;
}

/** The rules of --config, or empty ones (rules may still be pushed through Redis). */
async function loadInitialRules(options: ServiceOptions): Promise<RulesHolder> {
  return new RulesHolder(options.config !== undefined ? await loadRules(options.config, { mergeDomains: options.mergeDomains }) : undefined);
}

/** Reloads the rules when their files change (when they come from files). */
function watchRuleFiles(options: ServiceOptions, holder: RulesHolder, logger: Logger): RulesWatcher | undefined {
  if (options.config === undefined) return undefined;
  return watchRules(options.config, holder, {
    mergeDomains: options.mergeDomains,
    onError: (error) => logger.error({ err: error }, 'rules reload refused; the last good rules stay in force'),
    onWarning: (message) => logger.warn(message),
    onReload: (version) => logger.info({ version }, 'rules loaded'),
  });
}

/** Applies rules pushed through Redis (with a Redis store only). */
async function startRulesSync(store: MemoryStore | RedisStore, holder: RulesHolder, logger: Logger): Promise<RulesSync | undefined> {
  if (store.name !== 'redis') return undefined;
  const sync = new RulesSync({
    redis: (store as RedisStore).client,
    holder,
    onError: (error) => logger.error({ err: error }, 'a stored rules document was refused and skipped; the other domains apply'),
    onWarning: (message) => logger.warn(message),
    onApply: (version) => logger.info({ version }, 'pushed rules applied'),
  });
  await sync.start();
  return sync;
}

/** `/readyz`'s `rules` field when no rules are loaded. */
const NO_RULES = 'none loaded: nothing is limited';

/** Without --config (and no rules pushed through Redis yet), every check answers OK: say so at start. */
function warnIfNoRules(options: ServiceOptions, holder: RulesHolder, store: MemoryStore | RedisStore, logger: Logger): void {
  if (options.config !== undefined || holder.current.domainNames().length > 0) return;
  const until = store.name === 'redis' ? ' until rules are pushed (PUT /v1/rules)' : '';
  logger.warn(`no --config (or TOLLGATE_CONFIG) given: no rules are loaded, so nothing is limited and every check answers OK${until}; give --config FILE|DIR (docs/rules.md)`);
}

/** What buildContext needs beyond what it makes (the limiter, the events, the block list). */
interface ContextParts {
  readonly options: ServiceOptions;
  readonly logger: Logger;
  readonly store: MemoryStore | RedisStore;
  readonly holder: RulesHolder;
  readonly watcher: RulesWatcher | undefined;
  readonly sync: RulesSync | undefined;
  readonly startedAt: number;
}

function buildContext({ options, logger, store, holder, watcher, sync, startedAt }: ContextParts): ServiceContext {
  return {
    options,
    logger,
    limiter: createLimiter({
      store,
      rules: holder,
      failureMode: options.failureMode,
      expectedNodes: options.expectedNodes,
      deadlineMs: options.deadlineMs,
    }),
    store,
    holder,
    watcher,
    sync,
    events: new EventEmitter<ServiceEvents>(),
    blocks: new BlockList(),
    startedAt,
    clock: Date.now,
    readiness: async () => {
      const details: Record<string, unknown> = { rulesVersion: holder.current.version, domains: holder.current.domainNames(), store: store.name };
      let ready = true;
      // Ready all the same: answering OK to every check is what this service was asked to do.
      if (holder.current.domainNames().length === 0) details.rules = NO_RULES;
      if (watcher?.status().lastError !== undefined) details.rulesError = watcher.status().lastError;
      if (store.name === 'redis') {
        const reachable = await (store as RedisStore).client.ping().then(() => true, () => false);
        details.storeReachable = reachable;
        ready &&= reachable;
      }
      return { ready, details };
    },
  };
}

/** Listens on --host and --port; resolves with the port (the one given, or the one chosen for 0). */
async function listenHttp(server: Server, options: ServiceOptions): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(new InvalidOptionError(`HTTP cannot listen on ${options.host}:${options.port}: ${error.code === 'EADDRINUSE' ? 'the port is in use' : error.message}`)),
    );
    server.listen(options.port, options.host, () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

/** What runs once the HTTP server is made, and must be closed. */
interface ServiceParts {
  readonly context: ServiceContext;
  readonly server: Server;
  readonly metrics: { close(): void };
  readonly dashboard: { close(): void };
}

/** A listener could not start: closes what already runs, so the process can exit, and throws `error`. */
async function abandon({ context, server, metrics, dashboard }: ServiceParts, error: unknown): Promise<never> {
  server.close();
  context.watcher?.close();
  metrics.close();
  dashboard.close();
  await context.sync?.close();
  await context.limiter.close();
  throw error;
}

/** Stops accepting, lets in-flight requests finish, then closes the rest and the store. */
async function shutDown({ context, server, metrics, dashboard }: ServiceParts, grpc: GrpcServer | undefined): Promise<void> {
  const httpClosed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  // Event streams never finish on their own: end them first so the server can close at once.
  dashboard.close();
  await Promise.all([httpClosed, grpc?.close()]);
  context.watcher?.close();
  metrics.close();
  await context.sync?.close();
  await context.limiter.close();
  context.logger.info('stopped');
}

/** Starts the service; resolves once every listener is up. */
export async function startService(options: ServiceOptions, logger: Logger = createLogger(options.logLevel)): Promise<RunningService> {
  const startedAt = Date.now();
  const store = await createStoreFromOptions(options);
  const holder = await loadInitialRules(options);
  const watcher = watchRuleFiles(options, holder, logger);
  const sync = await startRulesSync(store, holder, logger);
  warnIfNoRules(options, holder, store, logger);
  const context = buildContext({ options, logger, store, holder, watcher, sync, startedAt });
  logStoreHealth(context);

  const { server, routes } = createHttpServer(context);
  const parts: ServiceParts = { context, server, metrics: attachMetrics(context, routes), dashboard: attachDashboard(context, routes) };
  const httpPort = await listenHttp(server, options).catch((error: unknown) => abandon(parts, error));
  logger.info({ port: httpPort, store: store.name, rules: holder.current.version }, `HTTP listening on ${options.host}:${httpPort}`);
  const grpc = await startGrpcServer(context, options.host, options.grpcPort).catch((error: unknown) =>
    abandon(parts, error instanceof Error && !(error instanceof InvalidOptionError) ? new InvalidOptionError(error.message) : error),
  );
  if (grpc !== undefined) logger.info({ port: grpc.port }, `gRPC listening on ${options.host}:${grpc.port}`);

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => (closing ??= shutDown(parts, grpc));
  return { httpPort, grpcPort: grpc?.port, context, close };
}
