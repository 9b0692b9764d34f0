/**
 * `tollgate serve`: the decision service. Wires the store (memory, Redis or Redis Cluster), the
 * rules (files with hot reload, pushes through Redis), the HTTP and gRPC listeners, metrics and
 * the dashboard; shuts down gracefully (stop accepting, finish in-flight checks, close Redis).
 */
import { EventEmitter } from 'node:events';
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
import { startGrpcServer } from './grpc.js';
import { createHttpServer } from './http.js';
import { attachMetrics } from './metrics.js';
import type { ServiceOptions } from './options.js';

/** A running service. */
export interface RunningService {
  readonly httpPort: number;
  readonly grpcPort: number | undefined;
  readonly context: ServiceContext;
  /** Graceful: stops accepting, lets in-flight requests finish, closes the store. */
  close(): Promise<void>;
}

/** Starts the service; resolves once every listener is up. */
/** JSON logs, or readable ones when a person is watching a terminal. */
export function createLogger(level: string): Logger {
  if (process.stdout.isTTY) return pino({ level, transport: { target: 'pino-pretty', options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } });
  return pino({ level });
}

export async function startService(options: ServiceOptions, logger: Logger = createLogger(options.logLevel)): Promise<RunningService> {
  const startedAt = Date.now();
  const store: MemoryStore | RedisStore =
    options.redis !== undefined
      ? redisStore({ url: options.redis })
      : options.redisCluster !== undefined
        ? redisStore({ cluster: options.redisCluster })
        : memoryStore();
  if (store.name === 'redis') await (store as RedisStore).ready();

  const holder = new RulesHolder(options.config !== undefined ? await loadRules(options.config) : undefined);
  const events = new EventEmitter<ServiceEvents>();
  let watcher: RulesWatcher | undefined;
  if (options.config !== undefined) {
    watcher = watchRules(options.config, holder, {
      onError: (error) => logger.error({ err: error }, 'rules reload refused; the last good rules stay in force'),
      onReload: (version) => logger.info({ version }, 'rules loaded'),
    });
  }
  let sync: RulesSync | undefined;
  if (store.name === 'redis') {
    sync = new RulesSync({
      redis: (store as RedisStore).client,
      holder,
      onError: (error) => logger.error({ err: error }, 'pushed rules refused; the last good rules stay in force'),
      onApply: (version) => logger.info({ version }, 'pushed rules applied'),
    });
    await sync.start();
  }
  const limiter = createLimiter({ store, rules: holder });

  const context: ServiceContext = {
    options,
    logger,
    limiter,
    store,
    holder,
    watcher,
    sync,
    events,
    blocks: new BlockList(),
    startedAt,
    clock: Date.now,
    readiness: async () => {
      const details: Record<string, unknown> = { rulesVersion: holder.current.version, domains: holder.current.domainNames(), store: store.name };
      let ready = true;
      if (watcher?.status().lastError !== undefined) details.rulesError = watcher.status().lastError;
      if (store.name === 'redis') {
        const reachable = await (store as RedisStore).client.ping().then(() => true, () => false);
        details.storeReachable = reachable;
        ready &&= reachable;
      }
      return { ready, details };
    },
  };

  const { server, routes } = createHttpServer(context);
  const metrics = attachMetrics(context, routes);
  const dashboard = attachDashboard(context, routes);
  // If a listener cannot start, close what already runs, so the process can exit.
  const abandon = async (error: unknown): Promise<never> => {
    server.close();
    watcher?.close();
    metrics.close();
    dashboard.close();
    await sync?.close();
    await limiter.close();
    throw error;
  };
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(new InvalidOptionError(`HTTP cannot listen on ${options.host}:${options.port}: ${error.code === 'EADDRINUSE' ? 'the port is in use' : error.message}`)),
    );
    server.listen(options.port, options.host, () => resolve());
  }).catch(abandon);
  const httpPort = (server.address() as AddressInfo).port;
  logger.info({ port: httpPort, store: store.name, rules: holder.current.version }, `HTTP listening on ${options.host}:${httpPort}`);
  const grpc = await startGrpcServer(context, options.host, options.grpcPort).catch((error: unknown) =>
    abandon(error instanceof Error && !(error instanceof InvalidOptionError) ? new InvalidOptionError(error.message) : error),
  );
  if (grpc !== undefined) logger.info({ port: grpc.port }, `gRPC listening on ${options.host}:${grpc.port}`);

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      const httpClosed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // Event streams never finish on their own: end them first so the server can close at once.
      dashboard.close();
      await Promise.all([httpClosed, grpc?.close()]);
      watcher?.close();
      metrics.close();
      await sync?.close();
      await limiter.close();
      logger.info('stopped');
    })();
    return closing;
  };
  return { httpPort, grpcPort: grpc?.port, context, close };
}
