/**
 * The Memcached store's options, checked once at construction: the servers (`host:port`, alone,
 * comma-separated, or a list), a key prefix, and its timeouts and retry bound.
 */
import { InvalidOptionError, describeValue } from '../../errors.js';
import { checkOptions, checkWholeNumber, checkWholeNumbers, type WholeNumberRange } from '../../options.js';

export interface MemcachedStoreOptions {
  /**
   * The memcached servers, `host:port` each: one string (`'10.0.0.5:11211'`), several
   * comma-separated (`'a:11211,b:11211'`), or a list. Keys are spread over them by consistent
   * hashing (ketama): every node given the same list sends a key to the same server.
   */
  readonly servers: string | readonly string[];
  /** Prepended to every key (default `tollgate:`); printable ASCII without spaces. */
  readonly keyPrefix?: string;
  /** The limiter's default deadline for decisions on this store, in ms. */
  readonly deadlineMs?: number;
  /** A command without a reply this long (ms, default 1,000) drops its connection. */
  readonly commandTimeoutMs?: number;
  /** How long a connection may take to open (ms, default 2,000). */
  readonly connectTimeoutMs?: number;
  /** After a connection fails, calls to that server fail at once for this long (ms, default 250), then it is tried again. */
  readonly reconnectDelayMs?: number;
  /**
   * Compare-and-set attempts of one decision (default 32) before it fails with a store error (which
   * the limiter answers with its failure mode): the bound under contention from other nodes.
   */
  readonly casAttempts?: number;
}

export const MEMCACHED_NUMBERS = {
  commandTimeoutMs: { min: 1, fallback: 1_000, unit: 'ms' },
  connectTimeoutMs: { min: 1, fallback: 2_000, unit: 'ms' },
  reconnectDelayMs: { min: 0, fallback: 250, unit: 'ms' },
  casAttempts: { min: 1, max: 1_000, fallback: 32 },
} as const satisfies Record<string, WholeNumberRange>;

const OPTION_NAMES: ReadonlySet<string> = new Set(['servers', 'keyPrefix', 'deadlineMs', ...Object.keys(MEMCACHED_NUMBERS)]);
/** Keys longer than this (memcached's own bound) are hashed; the prefix must leave room. */
export const MAX_KEY_BYTES = 250;
const MAX_PREFIX_BYTES = 64;

export interface CheckedOptions {
  readonly servers: readonly { readonly host: string; readonly port: number }[];
  readonly keyPrefix: string;
  readonly deadlineMs: number | undefined;
  readonly numbers: Record<keyof typeof MEMCACHED_NUMBERS, number>;
}

/** `host:port` servers from one string (comma-separated) or a list; `where` names the option in errors. */
export function parseServers(given: unknown, where: string): { host: string; port: number }[] {
  const items = typeof given === 'string' ? given.split(',') : Array.isArray(given) ? (given as unknown[]) : undefined;
  if (items === undefined || items.length === 0) {
    throw new InvalidOptionError(`${where} must be host:port or a list of them (e.g. '127.0.0.1:11211'), got ${describeValue(given)}`);
  }
  const servers = items.map((item) => {
    const match = typeof item === 'string' ? /^\s*([^\s:,]+|\[[0-9a-fA-F:.]+\]):(\d{1,5})\s*$/.exec(item) : null;
    if (match === null || Number(match[2]) < 1 || Number(match[2]) > 65_535) {
      throw new InvalidOptionError(`${where} must be host:port,host:port,... with ports 1-65535, got ${describeValue(item)}`);
    }
    return { host: match[1]!.replace(/^\[(.*)\]$/, '$1'), port: Number(match[2]) };
  });
  const names = servers.map(({ host, port }) => `${host}:${port}`);
  const twice = names.find((name, index) => names.indexOf(name) !== index);
  if (twice !== undefined) throw new InvalidOptionError(`${where} names ${twice} twice: list each server once`);
  return servers;
}

export function checkMemcachedOptions(options: MemcachedStoreOptions): CheckedOptions {
  checkOptions('memcachedStore', options, OPTION_NAMES, "{ servers: '127.0.0.1:11211' }");
  const servers = parseServers(options.servers, 'memcachedStore: servers');
  const keyPrefix = options.keyPrefix ?? 'tollgate:';
  if (typeof keyPrefix !== 'string' || !/^[\x21-\x7e]*$/.test(keyPrefix) || keyPrefix.length > MAX_PREFIX_BYTES) {
    throw new InvalidOptionError(`memcachedStore: keyPrefix must be printable ASCII without spaces, at most ${MAX_PREFIX_BYTES} characters, got ${describeValue(keyPrefix)}`);
  }
  const deadlineMs = options.deadlineMs === undefined ? undefined : checkWholeNumber(options.deadlineMs, { name: 'memcachedStore: deadlineMs', min: 1 });
  const numbers = checkWholeNumbers(MEMCACHED_NUMBERS, (name) => options[name], (name) => `memcachedStore: ${name}`);
  return { servers, keyPrefix, deadlineMs, numbers };
}
