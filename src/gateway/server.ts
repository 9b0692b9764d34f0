/**
 * `tollgate gateway`: the decision service (store, rules with hot reload, metrics, dashboard, admin
 * API) runs its admin plane on the admin port (`--admin-port` on `--admin-bind`), exactly as
 * `tollgate serve` runs it but without the decision listener and gRPC; the proxy
 * listens on its own port and decides every request through the service's context, so both count
 * in the same metrics. The gateway configuration is reloaded when its file changes (routes and
 * upstreams; a broken file keeps the last good one).
 */
import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { InvalidOptionError, TollgateError } from '../errors.js';
import { clientIp } from '../http/identity/index.js';
import {
  closeSilentConnections,
  createLogger,
  followConnections,
  secureServer,
  startService,
  type ConnectionLimits,
  type DrainState,
  type RunningService,
  type secureContextOptions,
  type ServiceHooks,
  type ServiceOptions,
} from '../service/index.js';
import { watchPath } from '../rules/watch-path.js';
import { loadGatewayConfig } from './config/read.js';
import type { GatewayConfig } from './config/types.js';
import { GatewayDeferral, deferNeedsRedis, hasRedis } from './defer/setup.js';
import { handleRequest } from './handler.js';
import { closeIdleConnections } from './idle.js';
import { gatewayRoutes, type GatewayState } from './state.js';
import { Upstreams } from './proxy.js';
import { GatewayRooms } from './waiting-room/index.js';

/** The gateway's own settings, beside the service's. */
export interface GatewayOptions {
  /** The gateway configuration file. */
  readonly configPath: string;
  readonly config: GatewayConfig;
  /** Where the proxy listens. */
  readonly host: string;
  readonly port: number;
  /** The service's settings: its `adminPort` and `adminHost` are the admin listener's, its `config` the rules. */
  readonly service: ServiceOptions;
}

/** A running gateway. */
export interface RunningGateway {
  readonly port: number;
  readonly adminPort: number;
  readonly service: RunningService;
  /** The routes and upstreams in force (swapped by reloads). */
  state(): GatewayState;
  /** Stops accepting, lets in-flight requests finish, then closes the service. */
  close(): Promise<void>;
  /** SIGTERM: the service drains (not ready, still serving for --drain-delay), then everything closes. */
  drain(): Promise<void>;
}

/** A client connection that sends and receives nothing this long is closed. */
const IDLE_TIMEOUT_MS = 300_000;

/** How long a changed configuration file is left to settle before it is read. */
const RELOAD_SETTLE_MS = 100;

/** Starts the service on the admin port, then the proxy; resolves once both listen. */
export async function startGateway(options: GatewayOptions, logger: Logger = createLogger(options.service.logLevel), hooks: ServiceHooks = {}): Promise<RunningGateway> {
  const service = await startService(options.service, logger, { ...hooks, grpc: false, decisions: false });
  // With Redis, the deferral is ready for defer routes (its connection opens once one exists).
  const deferral = hasRedis(options.service) ? new GatewayDeferral(options.service, service.registry, logger) : undefined;
  const rooms = new GatewayRooms(options.service, service, logger);
  const makeState = stateMaker(options, service, deferral, rooms);
  let state = makeState(options.config, new Upstreams(options.config.upstreams, options.config.connectTimeoutMs));
  void deferral?.sync(state);
  await deferral?.connected(2_000);
  await rooms.ready;
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => handleRequest(state, req, res);
  // With --tls-cert the proxy is HTTPS (mutual with --tls-client-ca), reloaded with the admin listener's certificate.
  const server = secureServer(service.tls, true, (secure) => createProxyServer(options.service.connections, onRequest, secure));
  const http = followConnections(server);
  let port: number;
  try {
    port = await listen(server, options.host, options.port);
  } catch (error) {
    await service.close();
    throw error;
  }
  const scheme = service.tls === undefined ? 'http' : 'https';
  logger.info({ port, adminPort: service.adminPort, routes: options.config.routes.length, tls: service.tls?.material.fingerprint }, `gateway listening on ${scheme}://${options.host}:${port}; admin (metrics, dashboard, rules) on ${options.service.adminHost}:${service.adminPort}`);

  const stopWatching = watchConfig(options.configPath, logger, (config) => {
    const previous = state.upstreams;
    state = makeState(config, new Upstreams(config.upstreams, config.connectTimeoutMs));
    void deferral?.sync(state);
    // Requests already forwarded finish on the old pools; close them once those are done.
    setTimeout(() => void previous.close(), options.config.routes.reduce((most, route) => Math.max(most, route.timeoutMs), 15_000)).unref();
  });

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      stopWatching();
      await http.close(options.service.shutdownTimeoutMs, logger);
      // Before the service: a worker's admission goes through its limiter.
      await deferral?.close();
      await rooms.close();
      await state.upstreams.close();
      await service.close();
    })());
  const lifecycle = service.context.lifecycle as DrainState;
  const drain = async (): Promise<void> => {
    if (closing !== undefined || lifecycle.draining) {
      lifecycle.skipDelay();
    } else {
      // Not ready at once (load balancers stop sending), still proxying for the drain delay.
      const delay = lifecycle.begin(options.service.drainDelayMs);
      service.context.events.emit('readiness');
      logger.info({ drainDelayMs: options.service.drainDelayMs }, `draining: /readyz answers 503 and requests are still proxied for ${options.service.drainDelayMs} ms`);
      await delay;
    }
    return close();
  };
  return { port, adminPort: service.adminPort, service, state: () => state, close, drain };
}

/** Builds the state a configuration gives; a defer route without Redis is refused (at a reload too: the last good one stays). */
function stateMaker(options: GatewayOptions, service: RunningService, deferral: GatewayDeferral | undefined, rooms: GatewayRooms): (config: GatewayConfig, upstreams: Upstreams) => GatewayState {
  const clientIps = clientIp({ trustProxy: options.config.trustProxy === false ? false : (options.config.trustProxy as number | string[]), ipv6Subnet: options.config.ipv6Subnet });
  return (config, upstreams) => {
    const defers = config.routes.some((route) => route.onLimit === 'defer');
    if (defers && deferral === undefined) throw new InvalidOptionError(deferNeedsRedis());
    return {
      context: service.context,
      routes: gatewayRoutes(config.routes),
      paths: config.paths,
      upstreams,
      sourceCluster: config.sourceCluster,
      clientIp: clientIps,
      answer: { headerStyle: config.headers, message: undefined },
      deferral: defers ? deferral : undefined,
      waitingRooms: rooms.for(config),
    };
  };
}

/** The proxy's listener, with the service's connection limits (docs/operations.md, "Connections"); HTTPS with `tls`. */
function createProxyServer(
  { keepAliveTimeoutMs, headersTimeoutMs, maxRequestsPerSocket }: ConnectionLimits,
  onRequest: (req: IncomingMessage, res: ServerResponse) => void,
  tls: ReturnType<typeof secureContextOptions> | undefined,
): Server | HttpsServer {
  // requestTimeout 0: a proxied upload or stream takes as long as its route allows.
  const httpOptions: ServerOptions = { connectionsCheckingInterval: 1_000, headersTimeout: headersTimeoutMs, requestTimeout: 0, keepAliveTimeout: keepAliveTimeoutMs };
  // A TLS handshake must end within the headers timeout too, as on the service's listeners.
  const server = tls === undefined ? createServer(httpOptions, onRequest) : createHttpsServer({ ...httpOptions, ...tls, handshakeTimeout: headersTimeoutMs }, onRequest);
  server.maxRequestsPerSocket = maxRequestsPerSocket;
  closeSilentConnections(server, headersTimeoutMs);
  // `Expect: 100-continue`: the handler invites the body only once the request is admitted.
  server.on('checkContinue', onRequest);
  // A connection silent this long is closed (envoy's stream idle timeout); the route timeout covers
  // upstreams. Swept (idle.ts), not node's `server.timeout`, whose timer is re-armed per request.
  closeIdleConnections(server, IDLE_TIMEOUT_MS);
  return server;
}

async function listen(server: Server | HttpsServer, host: string, port: number): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(new InvalidOptionError(`the gateway cannot listen on ${host}:${port}: ${error.code === 'EADDRINUSE' ? 'the port is in use' : error.message}`)),
    );
    server.listen(port, host, () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

/** Reloads the configuration when its file changes; a broken file is logged and the last good one stays. */
function watchConfig(path: string, logger: Logger, apply: (config: GatewayConfig) => void): () => void {
  let timer: NodeJS.Timeout | undefined;
  const reload = (): void => {
    timer = undefined;
    try {
      const config = loadGatewayConfig(path);
      apply(config);
      logger.info({ routes: config.routes.length }, 'gateway configuration reloaded (routes and upstreams; listen and rules take a restart)');
    } catch (error) {
      logger.error({ err: error instanceof TollgateError ? error.message : error }, 'gateway configuration reload refused; the last good configuration stays in force');
    }
  };
  const stop = watchPath(path, () => {
    clearTimeout(timer);
    timer = setTimeout(reload, RELOAD_SETTLE_MS);
  });
  return () => {
    clearTimeout(timer);
    stop();
  };
}
