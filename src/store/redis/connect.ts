/**
 * The ioredis connection of the Redis store: its options, which client each source gets (url,
 * cluster, sentinels or one given), and how it reconnects (backoff with jitter, never giving up).
 */
import { Cluster, Redis, type ClusterNode, type RedisOptions } from 'ioredis';
import { InvalidOptionError, describeValue } from '../../errors.js';
import { checkWholeNumber, type WholeNumberRange } from '../../options.js';

/** Options of {@link redisStore}: exactly one of `url`, `client`, `cluster` or `sentinels`. */
export interface RedisStoreOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://` for TLS. */
  readonly url?: string;
  /** An ioredis client or Cluster you configured yourself (Tollgate does not close it). */
  readonly client?: Redis | Cluster;
  /** Seed nodes of a Redis Cluster. */
  readonly cluster?: readonly { readonly host: string; readonly port: number }[];
  /**
   * Redis Sentinel: the sentinels to ask where the primary of `name` is. The store follows
   * failovers (it reconnects to whichever node the sentinels promote).
   */
  readonly sentinels?: readonly { readonly host: string; readonly port: number }[];
  /** With `sentinels`: the name of the monitored primary (`sentinel monitor <name> ...`), e.g. `mymaster`. */
  readonly name?: string;
  /** With `sentinels`: credentials of the sentinels themselves (`password` / `username` are the data nodes'). */
  readonly sentinelPassword?: string;
  readonly sentinelUsername?: string;
  /** Prefix of every key Tollgate writes. Default `tollgate:`. */
  readonly keyPrefix?: string;
  /** Password (and `username` for ACL users), for `cluster` / `sentinels` or to override the URL's. */
  readonly password?: string;
  readonly username?: string;
  /** TLS options (passed to Node's `tls.connect`); `true` for defaults. */
  readonly tls?: boolean | Record<string, unknown>;
  /** Deadline of one script call in ms. Default 1,000. */
  readonly commandTimeoutMs?: number;
  /**
   * The limiter's default deadline for decisions on this store, in ms (past it, the failure mode
   * answers). Default: the limiter's (50 ms).
   */
  readonly deadlineMs?: number;
  /** Deadline of the first connection in ms, for {@link RedisStore.ready}. Default 5,000. */
  readonly connectTimeoutMs?: number;
  /**
   * Most requests decided by one script call. Default 64: with more in flight, a tick's requests
   * go out as several calls back to back, so Redis works on one while Node prepares the next.
   */
  readonly maxBatch?: number;
  /**
   * Whose clock decides: `'redis'` (default), Redis `TIME`, one clock for every node, so nodes with
   * skewed clocks agree on every window; or `'caller'`, this process's clock, sent with each call:
   * a lone decision then takes 2 Redis commands fewer (no `TIME`, no `PEXPIRETIME`; measured no
   * less Redis time, the key being a string to parse), but the
   * difference between nodes' clocks becomes error in the windows (docs/redis.md "Whose clock"),
   * and each key is the string "v end", kept 1 s past its end. A call's or the limiter's explicit
   * `now` still wins over either.
   */
  readonly clock?: RedisClock;
}

/** Whose clock the Redis store decides on (see {@link RedisStoreOptions.clock}). */
export type RedisClock = 'redis' | 'caller';

/** A store's `clock` option, default `'redis'`. */
export function checkClock(where: string, value: unknown): RedisClock {
  if (value === undefined || value === 'redis' || value === 'caller') return value ?? 'redis';
  throw new InvalidOptionError(`${where}: clock must be 'redis' (Redis TIME, the default) or 'caller' (this process's clock), got ${describeValue(value)}`);
}

export const OPTION_NAMES: ReadonlySet<string> = new Set([
  'url',
  'client',
  'cluster',
  'sentinels',
  'name',
  'sentinelPassword',
  'sentinelUsername',
  'keyPrefix',
  'password',
  'username',
  'tls',
  'commandTimeoutMs',
  'deadlineMs',
  'connectTimeoutMs',
  'maxBatch',
  'clock',
]);

/** The timeouts the Redis store and the region store take alike: their ranges and defaults. */
export const TIMEOUT_NUMBERS = {
  commandTimeoutMs: { min: 1, fallback: 1_000 },
  connectTimeoutMs: { min: 1, fallback: 5_000 },
} as const satisfies Record<string, WholeNumberRange>;

/** A store's `deadlineMs`: undefined (the limiter's own deadline then applies) or a whole number ≥ 1. */
export function checkStoreDeadline(where: string, value: unknown): number | undefined {
  return value === undefined ? undefined : checkWholeNumber(value, { name: `${where}: deadlineMs`, min: 1 });
}

/**
 * Checks a key prefix, default `tollgate:`. No braces: the caller's key is the hash tag, and a
 * brace in the prefix would move it.
 */
export function checkKeyPrefix(where: string, value: unknown): string {
  if (value === undefined) return 'tollgate:';
  if (typeof value !== 'string' || /[{}]/.test(value)) {
    throw new InvalidOptionError(`${where}: keyPrefix must be a string without { or }, got ${describeValue(value)}`);
  }
  return value;
}

/** Reconnection delays, in ms: exponential from 25 ms, capped at 500 ms. */
const RECONNECT_BASE_MS = 25;
const RECONNECT_CAP_MS = 500;

/**
 * The delay before reconnection attempt `attempt` (1, 2, ...): exponential from 25 ms, capped at
 * 500 ms, with equal jitter (half fixed, half random), so that many Tollgate processes losing the
 * same Redis do not knock on it in lock-step, and a Redis that is back is used within ~0.5 s.
 * Never gives up. `random` is for tests.
 */
export function reconnectDelay(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(RECONNECT_CAP_MS, RECONNECT_BASE_MS * 2 ** Math.min(Math.max(attempt - 1, 0), 16));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/**
 * A reply of READONLY means the node we write to was demoted to a replica (a failover happened
 * behind our back): drop the connection, so the next one asks again where the primary is. The
 * command itself fails (it wrote nothing); it is not sent again.
 */
function reconnectOnReadOnly(error: Error): 1 | false {
  return error.message.startsWith('READONLY') ? 1 : false;
}

export type Opened = { client: Redis | Cluster; owned: boolean; address: string };

/** The ioredis client for `options` (one of url, cluster, sentinels or client), where it points, and whether the store owns it. */
export function openClient(options: RedisStoreOptions, timeouts: { commandTimeout: number; connectTimeout: number }): Opened {
  const connection: RedisOptions = {
    // A decision never waits for a connection: with the queue off, commands fail at once while disconnected.
    enableOfflineQueue: false,
    commandTimeout: timeouts.commandTimeout,
    maxRetriesPerRequest: 0,
    connectTimeout: timeouts.connectTimeout,
    ...(options.password !== undefined ? { password: options.password } : {}),
    ...(options.username !== undefined ? { username: options.username } : {}),
    ...(options.tls !== undefined && options.tls !== false ? { tls: options.tls === true ? {} : options.tls } : {}),
  };
  checkSentinelOnly(options);
  if (options.client !== undefined) {
    if (!(options.client instanceof Redis) && !(options.client instanceof Cluster)) {
      throw new InvalidOptionError(`redisStore: client must be an ioredis Redis or Cluster, got ${describeValue(options.client)}`);
    }
    const address = options.client instanceof Cluster ? 'the given cluster client' : describeClient(options.client);
    return { client: options.client, owned: false, address };
  }
  if (options.cluster !== undefined) {
    const nodes = validateNodes('cluster', options.cluster);
    const client = new Cluster(nodes as ClusterNode[], {
      enableOfflineQueue: false,
      redisOptions: connection,
      scaleReads: 'master',
      clusterRetryStrategy: (times) => reconnectDelay(times),
      // A slot half-moved between masters answers TRYAGAIN to a script over several of its keys:
      // ioredis retries at once (up to its 16 redirections), then the store splits the batch.
      retryDelayOnTryAgain: 0,
    });
    return { client, owned: true, address: `cluster ${nodes.map((node) => `${node.host}:${node.port}`).join(',')}` };
  }
  const reconnecting: RedisOptions = { ...connection, retryStrategy: (times) => reconnectDelay(times), reconnectOnError: reconnectOnReadOnly };
  if (options.sentinels !== undefined) return openSentinel(options, reconnecting);
  const url = options.url!;
  if (typeof url !== 'string' || !/^rediss?:\/\//.test(url)) {
    throw new InvalidOptionError(`redisStore: url must look like redis://host:port or rediss://host:port, got ${describeValue(url)}`);
  }
  const client = new Redis(url, reconnecting);
  return { client, owned: true, address: url.replace(/\/\/[^@/]*@/, '//***@') };
}

/** `name`, `sentinelPassword` and `sentinelUsername` only mean something with `sentinels`. */
function checkSentinelOnly(options: RedisStoreOptions): void {
  if (options.sentinels !== undefined) return;
  for (const field of ['name', 'sentinelPassword', 'sentinelUsername'] as const) {
    if (options[field] !== undefined) {
      throw new InvalidOptionError(`redisStore: ${field} goes with sentinels (Redis Sentinel); remove it, or give sentinels: [{ host, port }, ...]`);
    }
  }
}

/** A client that asks the sentinels where the primary of `options.name` is, and follows its failovers. */
function openSentinel(options: RedisStoreOptions, connection: RedisOptions): Opened {
  const sentinels = validateNodes('sentinels', options.sentinels);
  const name = options.name;
  if (typeof name !== 'string' || name.trim() === '') {
    throw new InvalidOptionError(
      `redisStore: sentinels needs name, the primary's name in the sentinels' "sentinel monitor <name> ..." (e.g. name: 'mymaster'), got ${describeValue(name)}`,
    );
  }
  for (const field of ['sentinelPassword', 'sentinelUsername'] as const) {
    const value = options[field];
    if (value !== undefined && typeof value !== 'string') {
      throw new InvalidOptionError(`redisStore: ${field} must be a string, got ${describeValue(value)}`);
    }
  }
  const client = new Redis({
    ...connection,
    sentinels,
    name,
    role: 'master',
    // When every sentinel is unreachable: the same backoff, never giving up.
    sentinelRetryStrategy: (times) => reconnectDelay(times),
    sentinelCommandTimeout: connection.commandTimeout,
    // Not ioredis's failoverDetector (+switch-master subscriptions): with ioredis 5.11 its sentinel
    // connections kept the process alive after quit(). A failover is followed at the next retry (≤ 0.5 s).
    ...(connection.tls !== undefined ? { enableTLSForSentinelMode: true } : {}),
    ...(options.sentinelPassword !== undefined ? { sentinelPassword: options.sentinelPassword } : {}),
    ...(options.sentinelUsername !== undefined ? { sentinelUsername: options.sentinelUsername } : {}),
  });
  return { client, owned: true, address: `sentinel ${name} via ${sentinels.map((node) => `${node.host}:${node.port}`).join(',')}` };
}

function validateNodes(field: 'cluster' | 'sentinels', nodes: unknown): { host: string; port: number }[] {
  if (!Array.isArray(nodes) || nodes.length === 0) {
    throw new InvalidOptionError(`redisStore: ${field} must be a non-empty list of { host, port }, got ${describeValue(nodes)}`);
  }
  return nodes.map((node: unknown, index) => {
    const { host, port } = (node ?? {}) as { host?: unknown; port?: unknown };
    if (typeof host !== 'string' || host === '' || typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65_535) {
      throw new InvalidOptionError(`redisStore: ${field}[${index}] must be { host: string, port: 1..65535 }, got ${describeValue(node)}`);
    }
    return { host, port };
  });
}

function describeClient(client: Redis): string {
  const { host, port } = client.options;
  return `${host ?? '127.0.0.1'}:${port ?? 6379}`;
}
