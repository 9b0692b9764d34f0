/**
 * `tollgate serve` settings: command-line flags, then `TOLLGATE_*` environment variables, then an
 * optional settings file, then defaults (flags win). Every value is validated; a bad one is an error naming the flag and the
 * variable, never a silent default.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { InvalidOptionError } from '../errors.js';
import { FAILURE_MODES, MAX_DEADLINE_MS, type FailureMode } from '../limiter/index.js';
import { checkDurationText, checkWholeNumberText, checkWholeNumbers, type DurationRange, type WholeNumberRange } from '../options.js';
import { MEMORY_STORE_NUMBERS } from '../store/memory.js';
import { parseServers } from '../store/memcached/options.js';
import { PORT_RANGE, planeSettings, tlsFiles, token, type TlsFiles } from './http/listener-options.js';
import { GRPC_CONNECTION_FLAGS, grpcConnectionLimits, type GrpcConnectionLimits } from './grpc/connection-options.js';

export { DEFAULT_ADMIN_PORT, type TlsFiles } from './http/listener-options.js';

export interface ServiceOptions {
  /** Rules file or directory (`--config`, `TOLLGATE_CONFIG`). */
  readonly config?: string;
  /** How the user gives rules, for the warning when none are loaded (the gateway's differs from serve's). */
  readonly rulesHint?: { readonly missing: string; readonly fix: string };
  /**
   * Most keys the memory store holds (`--max-keys`, `TOLLGATE_MAX_KEYS`); when full, the least
   * recently used key is evicted (docs/operations.md, "Memory store bound"). Default 1,000,000.
   * Refused with a Redis store, which is bounded by Redis's own `maxmemory`.
   */
  readonly maxKeys: number;
  /** Redis URL (`--redis`, `TOLLGATE_REDIS`); none of this, `redisCluster` or `redisSentinel`: memory store. */
  readonly redis?: string;
  /** Redis Cluster seed nodes (`--redis-cluster host:port,...`, `TOLLGATE_REDIS_CLUSTER`). */
  readonly redisCluster?: readonly { host: string; port: number }[];
  /**
   * Redis Sentinel (`--redis-sentinel host:port,...`, `TOLLGATE_REDIS_SENTINEL`): the sentinels, and
   * the monitored primary's name (`--redis-sentinel-name`, `TOLLGATE_REDIS_SENTINEL_NAME`, default `mymaster`).
   */
  readonly redisSentinel?: { readonly nodes: readonly { host: string; port: number }[]; readonly name: string };
  /** Memcached servers (`--memcached host:port,...`, `TOLLGATE_MEMCACHED`), keys spread by consistent hashing; none of the Redis options with it. */
  readonly memcached?: readonly { host: string; port: number }[];
  /** HTTP port (`--port`, `TOLLGATE_PORT`), default 8080; 0 picks a free port. */
  readonly port: number;
  /** gRPC port (`--grpc-port`, `TOLLGATE_GRPC_PORT`), default 8081; 0 picks a free port. */
  readonly grpcPort: number;
  /**
   * What carries gRPC (`--grpc-server`, `TOLLGATE_GRPC_SERVER`): `http2` (default: the protocol on
   * node:http2 with protobufjs codecs, about 1.5-2x the calls per CPU second) or `grpc-js`
   * (@grpc/grpc-js). Both answer the same bytes (docs/service.md, "gRPC servers").
   */
  readonly grpcServer: GrpcServerKind;
  /** Address to listen on (`--host`, `TOLLGATE_HOST`), default 0.0.0.0. */
  readonly host: string;
  /** Bearer token for the admin endpoints (`--admin-token`, `TOLLGATE_ADMIN_TOKEN`, or the file `--admin-token-file` names); unset: admin disabled. */
  readonly adminToken?: string;
  /**
   * The admin listener (docs/service.md, "Planes"): the dashboard, `/metrics`, `/v1/events`, the
   * rules in force and the admin API, away from the decisions. Port `--admin-port`
   * (`TOLLGATE_ADMIN_PORT`, default 6070: envoyproxy/ratelimit's debug port, which serves the same
   * kind of things, and not Envoy's 9901, which an Envoy sidecar beside the service already holds);
   * address `--admin-bind` (`TOLLGATE_ADMIN_BIND`, default 127.0.0.1: loopback, as Envoy's admin
   * interface is usually bound, because these pages show callers' addresses and ids).
   */
  readonly adminPort: number;
  readonly adminHost: string;
  /**
   * Bearer token for the read-only observability endpoints on the admin listener (`--metrics-token`,
   * `TOLLGATE_METRICS_TOKEN`, or the file `--metrics-token-file` names): `/metrics`, `/dashboard`, `/v1/events`, `GET /v1/rules`, `/rlconfig`.
   * Unset: they answer anyone who reaches the admin listener. The admin token opens them too.
   */
  readonly metricsToken?: string;
  /**
   * Once every listener is up, where they listen is written to this file as JSON, for `tollgate
   * health` (`--address-file`, `TOLLGATE_ADDRESS_FILE`; docs/operations.md, "Health checks"); removed
   * at stop. Unset: no file.
   */
  readonly addressFile?: string;
  /**
   * `--admin-public` (`TOLLGATE_ADMIN_PUBLIC`): the admin listener may be bound beyond loopback
   * without a metrics token, its observability pages open to whoever reaches it. Without it, such
   * a start is refused. Default false.
   */
  readonly adminPublic: boolean;
  /** HTTPS and gRPC over TLS (`--tls-cert`, `--tls-key`, `--tls-client-ca`): see {@link TlsFiles}; unset: plain text. */
  readonly tls?: TlsFiles;

  /** pino level (`--log-level`, `TOLLGATE_LOG_LEVEL`), default info. */
  readonly logLevel: string;
  /** Processes serving the same ports (`--workers`, `TOLLGATE_WORKERS`), default 1; > 1 needs Redis. */
  readonly workers: number;
  /** envoy's MERGE_DOMAIN_CONFIG (`--merge-domains`, `TOLLGATE_MERGE_DOMAINS`): one domain across files is merged. */
  readonly mergeDomains: boolean;
  /**
   * Rate-limit headers in envoy answers (gRPC `response_headers_to_add`, `/json` `responseHeadersToAdd`
   * and its HTTP headers), `--response-headers`, `TOLLGATE_RESPONSE_HEADERS`: `off` (default, as
   * envoy), `envoy` (envoy's LIMIT_RESPONSE_HEADERS_ENABLED: the three headers named below; `true`
   * means this) or `full` (Tollgate's: X-RateLimit-*, the IETF RateLimit-Policy / RateLimit, Retry-After).
   */
  readonly responseHeaders: ResponseHeaders;
  /** envoy's LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER (`--header-limit`, ...). */
  readonly headerNames: { readonly limit: string; readonly remaining: string; readonly reset: string };
  /** envoy's RESPONSE_DYNAMIC_METADATA (`--response-dynamic-metadata`): answers carry `dynamic_metadata`. Default off. */
  readonly responseDynamicMetadata: boolean;
  /** envoy's SHADOW_MODE (`--shadow-mode`): the overall code is always OK. Default off. */
  readonly shadowMode: boolean;
  /** envoy's QUOTA_MODE (`--quota-mode`): every limit is in quota mode. Default off. */
  readonly quotaMode: boolean;
  /**
   * What a check gets when the store fails, is slower than the deadline or its breaker is open
   * (`--failure-mode`, `TOLLGATE_FAILURE_MODE`), for rules without `failure_mode`: `local`
   * (default), `open` or `closed`.
   */
  readonly failureMode: FailureMode;
  /** Nodes sharing the store (`--expected-nodes`): `local` enforces ⌈limit / N⌉ per node. Default 1. */
  readonly expectedNodes: number;
  /** Longest wait for the store per check, in ms (`--deadline-ms`). Default 50. */
  readonly deadlineMs: number;
  /**
   * How a check refused by `closed` is answered (`--fail-closed-status`): 429 (default: OVER_LIMIT,
   * which envoy enforces whatever its failure_mode_deny) or 503 (HTTP 503, gRPC UNAVAILABLE).
   */
  readonly failClosedStatus: 429 | 503;
  /**
   * Keys the local over-limit cache remembers (`--local-cache-keys`, `TOLLGATE_LOCAL_CACHE_KEYS`):
   * a denied key is answered by this node until its retry time, without a store call. Default
   * 100,000; 0 turns it off.
   */
  readonly localCacheKeys: number;
  /**
   * On SIGTERM/SIGINT, how long (ms) the service keeps serving while `/readyz` says `draining`, so
   * load balancers stop sending before the listeners close (`--drain-delay`, `TOLLGATE_DRAIN_DELAY`).
   * Default 5,000; 0 closes at once.
   */
  readonly drainDelayMs: number;
  /** After the listeners close, how long (ms) in-flight requests may take before their connections are cut (`--shutdown-timeout`). Default 10,000. */
  readonly shutdownTimeoutMs: number;
  /**
   * The HTTP listeners' connection limits (docs/operations.md, "Connections"): an idle keep-alive
   * connection is closed after `keepAliveTimeoutMs` (`--keep-alive-timeout`, default 65,000: above
   * the 60 s idle timeout of common load balancers, so the balancer closes first); a connection's
   * request must send its headers within `headersTimeoutMs` (`--headers-timeout`, default 5,000),
   * and a new connection that sends nothing at all is closed after that long too; a whole request
   * must arrive within `requestTimeoutMs` (`--request-timeout`, default 10,000); a connection
   * carries at most `maxRequestsPerSocket` requests (`--max-requests-per-socket`, 0: no cap).
   */
  readonly connections: ConnectionLimits;
  /**
   * The gRPC listener's connection limits (docs/operations.md, "gRPC connections"): idle and
   * maximum age (with grace), the per-call receive timeout, calls per connection and connections;
   * a connection that sends nothing is closed after `connections.headersTimeoutMs`, as on HTTP.
   */
  readonly grpcConnections: GrpcConnectionLimits;
}

/** See {@link ServiceOptions.connections}; every duration in ms. */
export interface ConnectionLimits {
  readonly keepAliveTimeoutMs: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly maxRequestsPerSocket: number;
}

/** The gRPC servers `--grpc-server` chooses between. */
export const GRPC_SERVERS = ['http2', 'grpc-js'] as const;
export type GrpcServerKind = (typeof GRPC_SERVERS)[number];

/** Which rate-limit headers envoy answers carry. */
export type ResponseHeaders = 'off' | 'envoy' | 'full';

/** The flags `serve` takes: name → environment variable. */
export const SERVE_FLAGS: Readonly<Record<string, string>> = {
  config: 'TOLLGATE_CONFIG',
  redis: 'TOLLGATE_REDIS',
  'redis-cluster': 'TOLLGATE_REDIS_CLUSTER',
  'redis-sentinel': 'TOLLGATE_REDIS_SENTINEL',
  'redis-sentinel-name': 'TOLLGATE_REDIS_SENTINEL_NAME',
  memcached: 'TOLLGATE_MEMCACHED',
  port: 'TOLLGATE_PORT',
  'grpc-port': 'TOLLGATE_GRPC_PORT',
  'grpc-server': 'TOLLGATE_GRPC_SERVER',
  host: 'TOLLGATE_HOST',
  'admin-token': 'TOLLGATE_ADMIN_TOKEN',
  'admin-token-file': 'TOLLGATE_ADMIN_TOKEN_FILE',
  'admin-port': 'TOLLGATE_ADMIN_PORT',
  'admin-bind': 'TOLLGATE_ADMIN_BIND',
  'metrics-token': 'TOLLGATE_METRICS_TOKEN',
  'metrics-token-file': 'TOLLGATE_METRICS_TOKEN_FILE',
  'admin-public': 'TOLLGATE_ADMIN_PUBLIC',
  'tls-cert': 'TOLLGATE_TLS_CERT',
  'tls-key': 'TOLLGATE_TLS_KEY',
  'tls-client-ca': 'TOLLGATE_TLS_CLIENT_CA',
  'tls-client-san': 'TOLLGATE_TLS_CLIENT_SAN',
  'log-level': 'TOLLGATE_LOG_LEVEL',
  workers: 'TOLLGATE_WORKERS',
  'merge-domains': 'TOLLGATE_MERGE_DOMAINS',
  'response-headers': 'TOLLGATE_RESPONSE_HEADERS',
  'header-limit': 'TOLLGATE_HEADER_LIMIT',
  'header-remaining': 'TOLLGATE_HEADER_REMAINING',
  'header-reset': 'TOLLGATE_HEADER_RESET',
  'response-dynamic-metadata': 'TOLLGATE_RESPONSE_DYNAMIC_METADATA',
  'shadow-mode': 'TOLLGATE_SHADOW_MODE',
  'quota-mode': 'TOLLGATE_QUOTA_MODE',
  'failure-mode': 'TOLLGATE_FAILURE_MODE',
  'expected-nodes': 'TOLLGATE_EXPECTED_NODES',
  'deadline-ms': 'TOLLGATE_DEADLINE_MS',
  'fail-closed-status': 'TOLLGATE_FAIL_CLOSED_STATUS',
  'local-cache-keys': 'TOLLGATE_LOCAL_CACHE_KEYS',
  'drain-delay': 'TOLLGATE_DRAIN_DELAY',
  'shutdown-timeout': 'TOLLGATE_SHUTDOWN_TIMEOUT',
  'keep-alive-timeout': 'TOLLGATE_KEEP_ALIVE_TIMEOUT',
  'headers-timeout': 'TOLLGATE_HEADERS_TIMEOUT',
  'request-timeout': 'TOLLGATE_REQUEST_TIMEOUT',
  'max-requests-per-socket': 'TOLLGATE_MAX_REQUESTS_PER_SOCKET',
  ...GRPC_CONNECTION_FLAGS,
  'max-keys': 'TOLLGATE_MAX_KEYS',
  settings: 'TOLLGATE_SETTINGS',
  'address-file': 'TOLLGATE_ADDRESS_FILE',
};

/** The `serve` flags that are switches: `--merge-domains` alone means true; variables take true/false. */
export const SWITCH_FLAGS: ReadonlySet<string> = new Set(['admin-public', 'merge-domains', 'response-dynamic-metadata', 'shadow-mode', 'quota-mode']);

/** An HTTP header name (RFC 9110 token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

const LOG_LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/**
 * Reads a settings file (`--settings FILE`, `TOLLGATE_SETTINGS`): YAML or JSON mapping flag names
 * (`port`, `redis`, `admin-token`, ...) to values. Unknown names are errors.
 */
export function readSettingsFile(path: string): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = parseYaml(readFileSync(path, 'utf8'), { maxAliasCount: 0 });
  } catch (error) {
    throw new InvalidOptionError(`settings file ${path} cannot be read: ${(error as Error).message}`);
  }
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) throw new InvalidOptionError(`settings file ${path} must be a mapping of flag names to values`);
  const settings: Record<string, string> = {};
  for (const [name, value] of Object.entries(parsed)) {
    if (!(name in SERVE_FLAGS) || name === 'settings') {
      throw new InvalidOptionError(`settings file ${path}: unknown setting ${JSON.stringify(name)}; the settings are ${Object.keys(SERVE_FLAGS).filter((flag) => flag !== 'settings').join(', ')}`);
    }
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
      throw new InvalidOptionError(`settings file ${path}: ${name} must be a string, a number or true/false`);
    }
    settings[name] = String(value);
  }
  return settings;
}

type EnvoySettings = Pick<ServiceOptions, 'mergeDomains' | 'responseHeaders' | 'headerNames' | 'responseDynamicMetadata' | 'shadowMode' | 'quotaMode'>;

/** A switch's value: unset, false or 0 is off; true or 1 on; anything else refused. */
function switchValue(value: (flag: string) => string | undefined, where: (flag: string) => string, flag: string): boolean {
  const text = value(flag)?.toLowerCase();
  if (text === undefined || text === 'false' || text === '0') return false;
  if (text === 'true' || text === '1') return true;
  throw new InvalidOptionError(`${where(flag)} must be true or false, got ${JSON.stringify(value(flag))}`);
}

/** The settings envoyproxy/ratelimit users know (MERGE_DOMAIN_CONFIG, LIMIT_*_HEADER, ...). */
function envoySettings(value: (flag: string) => string | undefined, where: (flag: string) => string): EnvoySettings {
  const toggle = (flag: string): boolean => switchValue(value, where, flag);
  const headerName = (flag: string, fallback: string): string => {
    const name = value(flag) ?? fallback;
    if (!HEADER_NAME.test(name)) throw new InvalidOptionError(`${where(flag)} must be an HTTP header name like ${fallback}, got ${JSON.stringify(name)}`);
    return name;
  };
  return {
    mergeDomains: toggle('merge-domains'),
    responseHeaders: responseHeaders(value('response-headers'), where('response-headers')),
    headerNames: { limit: headerName('header-limit', 'RateLimit-Limit'), remaining: headerName('header-remaining', 'RateLimit-Remaining'), reset: headerName('header-reset', 'RateLimit-Reset') },
    responseDynamicMetadata: toggle('response-dynamic-metadata'),
    shadowMode: toggle('shadow-mode'),
    quotaMode: toggle('quota-mode'),
  };
}

/** Reads the whole-number flags of `table` (by flag name): each one given, checked; each other, its fallback. */
function wholeFlags<F extends string>(table: Readonly<Record<F, WholeNumberRange>>, value: (flag: string) => string | undefined, where: (flag: string) => string): Record<F, number> {
  return checkWholeNumbers(table, value, where, checkWholeNumberText);
}

/** The fault flags' ranges and defaults. */
const FAULT_FLAGS = {
  'expected-nodes': { min: 1, max: 10_000, unit: 'nodes', fallback: 1 },
  'deadline-ms': { min: 1, max: MAX_DEADLINE_MS, unit: 'ms', fallback: 50 },
  'local-cache-keys': { min: 0, max: 10_000_000, unit: 'keys', meaning: '0: off', fallback: 100_000 },
} as const satisfies Record<string, WholeNumberRange>;

type FaultSettings = Pick<ServiceOptions, 'failureMode' | 'expectedNodes' | 'deadlineMs' | 'failClosedStatus' | 'localCacheKeys'>;

/** What checks get while the store fails (docs/operations.md, "Failure modes and guarantees"). */
function faultSettings(value: (flag: string) => string | undefined, where: (flag: string) => string): FaultSettings {
  const mode = value('failure-mode')?.toLowerCase() ?? 'local';
  if (!(FAILURE_MODES as readonly string[]).includes(mode)) {
    throw new InvalidOptionError(`${where('failure-mode')} must be local (each node enforces its share), open (admit) or closed (refuse), got ${JSON.stringify(value('failure-mode'))}`);
  }
  const status = value('fail-closed-status') ?? '429';
  if (status !== '429' && status !== '503') {
    throw new InvalidOptionError(`${where('fail-closed-status')} must be 429 (OVER_LIMIT) or 503 (unavailable), got ${JSON.stringify(status)}`);
  }
  const numbers = wholeFlags(FAULT_FLAGS, value, where);
  return {
    failureMode: mode as FailureMode,
    expectedNodes: numbers['expected-nodes'],
    deadlineMs: numbers['deadline-ms'],
    failClosedStatus: Number(status) as 429 | 503,
    localCacheKeys: numbers['local-cache-keys'],
  };
}

type ShutdownSettings = Pick<ServiceOptions, 'drainDelayMs' | 'shutdownTimeoutMs'>;

/** Longest drain delay and shutdown timeout: ten minutes. */
export const MAX_SHUTDOWN_MS = 600_000;

/** The shutdown flags' ranges and defaults (durations with their unit: 5s, 500ms). */
const SHUTDOWN_FLAGS = {
  'drain-delay': { minMs: 0, maxMs: MAX_SHUTDOWN_MS, fallbackMs: 5_000 },
  'shutdown-timeout': { minMs: 1, maxMs: MAX_SHUTDOWN_MS, fallbackMs: 10_000 },
} as const satisfies Record<string, DurationRange>;

/** Each duration flag of `table`, read with {@link checkDurationText}. */
function durationFlags<K extends string>(table: Readonly<Record<K, DurationRange>>, value: (flag: string) => string | undefined, where: (flag: string) => string): Record<K, number> {
  return Object.fromEntries(Object.entries<DurationRange>(table).map(([flag, range]) => [flag, checkDurationText(value(flag), where(flag), range)])) as Record<K, number>;
}

/** How SIGTERM/SIGINT drains and stops the service (docs/operations.md, "Start and shutdown"). */
function shutdownSettings(value: (flag: string) => string | undefined, where: (flag: string) => string): ShutdownSettings {
  const ms = durationFlags(SHUTDOWN_FLAGS, value, where);
  return { drainDelayMs: ms['drain-delay'], shutdownTimeoutMs: ms['shutdown-timeout'] };
}

/** Longest connection timeout: an hour. */
export const MAX_CONNECTION_TIMEOUT_MS = 3_600_000;

/** The connection timeouts' ranges and defaults (durations with their unit). */
const CONNECTION_TIMEOUTS = {
  'keep-alive-timeout': { minMs: 1, maxMs: MAX_CONNECTION_TIMEOUT_MS, fallbackMs: 65_000 },
  'headers-timeout': { minMs: 1, maxMs: MAX_CONNECTION_TIMEOUT_MS, fallbackMs: 5_000 },
  'request-timeout': { minMs: 1, maxMs: MAX_CONNECTION_TIMEOUT_MS, fallbackMs: 10_000 },
} as const satisfies Record<string, DurationRange>;

const CONNECTION_COUNTS = {
  'max-requests-per-socket': { min: 0, max: 1_000_000_000, unit: 'requests', meaning: '0: no cap', fallback: 0 },
} as const satisfies Record<string, WholeNumberRange>;

/** The HTTP listeners' timeouts and per-connection request cap (docs/operations.md, "Connections"). */
function connectionLimits(value: (flag: string) => string | undefined, where: (flag: string) => string): ConnectionLimits {
  const ms = durationFlags(CONNECTION_TIMEOUTS, value, where);
  const limits = {
    keepAliveTimeoutMs: ms['keep-alive-timeout'],
    headersTimeoutMs: ms['headers-timeout'],
    requestTimeoutMs: ms['request-timeout'],
    maxRequestsPerSocket: wholeFlags(CONNECTION_COUNTS, value, where)['max-requests-per-socket'],
  };
  // node:http refuses a headers timeout longer than the request timeout (the headers are part of the request).
  if (limits.headersTimeoutMs > limits.requestTimeoutMs) {
    throw new InvalidOptionError(`${where('headers-timeout')} (${limits.headersTimeoutMs} ms) must not exceed ${where('request-timeout')} (${limits.requestTimeoutMs} ms): the headers are part of the request`);
  }
  return limits;
}

function responseHeaders(text: string | undefined, where: string): ResponseHeaders {
  const given = text?.toLowerCase() ?? 'off';
  if (given === 'off' || given === 'false' || given === '0') return 'off';
  if (given === 'envoy' || given === 'true' || given === '1') return 'envoy';
  if (given === 'full') return 'full';
  throw new InvalidOptionError(`${where} must be off, envoy (envoy's three headers; also true) or full (Tollgate's X-RateLimit-*, RateLimit-Policy, RateLimit, Retry-After), got ${JSON.stringify(text)}`);
}

type RedisSettings = Pick<ServiceOptions, 'redis' | 'redisCluster' | 'redisSentinel'>;

/** `--memcached host:port,...`, alone: a service shares one store. */
function memcachedServers(value: (flag: string) => string | undefined, where: (flag: string) => string): ServiceOptions['memcached'] {
  const text = value('memcached');
  if (text === undefined) return undefined;
  const redisFlags = (['redis', 'redis-cluster', 'redis-sentinel'] as const).filter((flag) => value(flag) !== undefined);
  if (redisFlags.length > 0) {
    throw new InvalidOptionError(`give ${where('memcached')} or a Redis store, not both (also given: ${redisFlags.map((flag) => `--${flag}`).join(', ')})`);
  }
  return parseServers(text, where('memcached'));
}

/** `--redis`, `--redis-cluster` or `--redis-sentinel` (+ `--redis-sentinel-name`): at most one. */
function redisSettings(value: (flag: string) => string | undefined, where: (flag: string) => string): RedisSettings {
  const redis = value('redis');
  const clusterText = value('redis-cluster');
  const sentinelText = value('redis-sentinel');
  const given = (['redis', 'redis-cluster', 'redis-sentinel'] as const).filter((flag) => value(flag) !== undefined);
  if (given.length > 1) {
    throw new InvalidOptionError(`give one of ${where('redis')}, ${where('redis-cluster')} or ${where('redis-sentinel')}, not ${given.map((flag) => `--${flag}`).join(' and ')}`);
  }
  if (redis !== undefined && !/^rediss?:\/\//.test(redis)) {
    throw new InvalidOptionError(`${where('redis')} must look like redis://host:6379, got ${JSON.stringify(redis)}`);
  }
  const sentinelName = value('redis-sentinel-name');
  if (sentinelName !== undefined && sentinelText === undefined) {
    throw new InvalidOptionError(`${where('redis-sentinel-name')} goes with ${where('redis-sentinel')}: give the sentinels too, or drop the name`);
  }
  if (sentinelName !== undefined && !/^[^\s]+$/.test(sentinelName)) {
    throw new InvalidOptionError(`${where('redis-sentinel-name')} must be the primary's name in "sentinel monitor <name> ...", without spaces, got ${JSON.stringify(sentinelName)}`);
  }
  const redisCluster = clusterText === undefined ? undefined : hostPorts(clusterText, where('redis-cluster'));
  const redisSentinel = sentinelText === undefined ? undefined : { nodes: hostPorts(sentinelText, where('redis-sentinel')), name: sentinelName ?? 'mymaster' };
  return {
    ...(redis !== undefined ? { redis } : {}),
    ...(redisCluster !== undefined ? { redisCluster } : {}),
    ...(redisSentinel !== undefined ? { redisSentinel } : {}),
  };
}

/** `--max-keys`: the memory store's bound; meaningless with Redis (which `maxmemory` bounds), so refused there. */
function memoryStoreKeys(value: (flag: string) => string | undefined, where: (flag: string) => string, redis: RedisSettings): number {
  const text = value('max-keys');
  if (text === undefined) return MEMORY_STORE_NUMBERS.maxKeys.fallback;
  if (Object.keys(redis).length > 0) {
    throw new InvalidOptionError(`${where('max-keys')} bounds the memory store only; with a Redis store, bound memory with Redis's maxmemory instead, and drop --max-keys`);
  }
  return checkWholeNumberText(text, { ...MEMORY_STORE_NUMBERS.maxKeys, name: where('max-keys'), unit: 'keys' });
}

/** `host:port,host:port,...`. */
function hostPorts(text: string, where: string): { host: string; port: number }[] {
  return text.split(',').map((node) => {
    const match = /^\s*([^\s:]+):(\d{1,5})\s*$/.exec(node);
    if (match === null || Number(match[2]) < 1 || Number(match[2]) > 65_535) {
      throw new InvalidOptionError(`${where} must be host:port,host:port,..., got ${JSON.stringify(node)}`);
    }
    return { host: match[1]!, port: Number(match[2]) };
  });
}

/** Merges flags over the environment over the settings file, and validates the result. */
export function resolveServiceOptions(flags: Readonly<Record<string, string | undefined>>, env: NodeJS.ProcessEnv): ServiceOptions {
  const settingsPath = flags.settings ?? env.TOLLGATE_SETTINGS;
  const file = settingsPath === undefined || settingsPath === '' ? {} : readSettingsFile(settingsPath);
  const value = (flag: string): string | undefined => {
    const given = flags[flag] ?? env[SERVE_FLAGS[flag]!] ?? file[flag];
    return given === undefined || given === '' ? undefined : given;
  };
  const where = (flag: string) => `--${flag} (or ${SERVE_FLAGS[flag]})`;
  const port = (flag: string, fallback: number): number => checkWholeNumberText(value(flag), { ...PORT_RANGE, name: where(flag), fallback });
  const memcached = memcachedServers(value, where);
  const redisGiven = redisSettings(value, where);
  const { redis, redisCluster, redisSentinel } = redisGiven;
  if (memcached !== undefined && value('max-keys') !== undefined) {
    throw new InvalidOptionError(`${where('max-keys')} bounds the memory store only; with memcached, bound memory with memcached's -m instead, and drop --max-keys`);
  }
  const maxKeys = memoryStoreKeys(value, where, redisGiven);
  const logLevel = value('log-level') ?? 'info';
  if (!LOG_LEVELS.has(logLevel)) throw new InvalidOptionError(`${where('log-level')} must be one of ${[...LOG_LEVELS].join(', ')}, got ${JSON.stringify(logLevel)}`);
  const config = value('config');
  const addressFile = value('address-file');
  const grpcServer = value('grpc-server') ?? 'http2';
  if (!(GRPC_SERVERS as readonly string[]).includes(grpcServer)) {
    throw new InvalidOptionError(`${where('grpc-server')} must be http2 (node:http2, the default) or grpc-js (@grpc/grpc-js), got ${JSON.stringify(grpcServer)}`);
  }
  const workers = checkWholeNumberText(value('workers'), { name: where('workers'), min: 1, max: 64, fallback: 1 });
  if (workers > 1 && redis === undefined && redisCluster === undefined && redisSentinel === undefined && memcached === undefined) {
    throw new InvalidOptionError(`${where('workers')} above 1 needs --redis, --redis-cluster, --redis-sentinel or --memcached: each worker's memory store would count on its own`);
  }
  const tls = tlsFiles(value, where);
  const adminToken = token(value, where, 'admin-token', 'it guards rule changes and key resets');
  const httpPort = port('port', 8080);
  const grpcPort = port('grpc-port', 8081);
  // Refused before anything listens: the second listener would fail with EADDRINUSE after the first started.
  if (httpPort !== 0 && httpPort === grpcPort) {
    throw new InvalidOptionError(`${where('port')} and ${where('grpc-port')} are both ${httpPort}: HTTP and gRPC listen apart, give each its own port (defaults 8080 and 8081)`);
  }
  return {
    workers,
    maxKeys,
    ...planeSettings(value, where, (flag) => switchValue(value, where, flag), { port, http: httpPort, grpc: grpcPort }),
    ...envoySettings(value, where),
    ...faultSettings(value, where),
    ...shutdownSettings(value, where),
    connections: connectionLimits(value, where),
    grpcConnections: grpcConnectionLimits(value, where),
    ...(config !== undefined ? { config } : {}),
    ...(addressFile !== undefined ? { addressFile } : {}),
    ...(redis !== undefined ? { redis } : {}),
    ...(redisCluster !== undefined ? { redisCluster } : {}),
    ...(redisSentinel !== undefined ? { redisSentinel } : {}),
    ...(memcached !== undefined ? { memcached } : {}),
    ...(adminToken !== undefined ? { adminToken } : {}),
    ...(tls !== undefined ? { tls } : {}),
    port: httpPort,
    grpcPort,
    grpcServer: grpcServer as GrpcServerKind,
    host: value('host') ?? '0.0.0.0',
    logLevel,
  };
}
