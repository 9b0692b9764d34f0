/**
 * What the multi-region store and its replicator share: region names, the names of the keys they
 * keep besides the counters, connecting (through the Redis store's `openClient`), and running a
 * script by SHA1 with a reload when Redis lost it.
 */
import { Redis } from 'ioredis';
import { InvalidOptionError, describeValue } from '../../errors.js';
import { openClient, type RedisStoreOptions } from '../redis/connect.js';
import type { Script } from './lua.js';

/** A region name: letters, digits, `_` and `-`, 1–32 characters (it names hash fields `<region>:<window>`). */
const REGION_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/;

/** Checks a region name; `where` names the caller for the message. */
export function checkRegionName(where: string, value: unknown): string {
  if (typeof value !== 'string' || !REGION_NAME.test(value)) {
    throw new InvalidOptionError(
      `${where}: region must be a name of 1–32 letters, digits, _ or - starting with a letter or digit (e.g. 'eu' or 'us-east'), got ${describeValue(value)}`,
    );
  }
  return value;
}

/** The keys a region keeps besides its counters. */
export interface RegionKeys {
  /** Sorted set: hash keys this region changed, scored by change sequence. */
  readonly changes: string;
  /** The change sequence counter. */
  readonly sequence: string;
  /** Hash: peer region → the sequence it has been sent up to. */
  readonly cursors: string;
  /**
   * String: a random id the replicator writes once (SET NX) for the data this Redis holds. When the
   * Redis loses its data (a restart without persistence, FLUSHALL) the id goes with it and the
   * sequence starts again: the replicator sees an id it does not know, and sends from the start.
   */
  readonly epoch: string;
}

export function regionKeys(keyPrefix: string, region: string): RegionKeys {
  return {
    changes: `${keyPrefix}region-changes:${region}`,
    sequence: `${keyPrefix}region-sequence:${region}`,
    cursors: `${keyPrefix}region-cursors:${region}`,
    epoch: `${keyPrefix}region-epoch:${region}`,
  };
}

/** Where a region's Redis is: a URL, or an ioredis client you configured (not closed for you). */
export interface RegionConnection {
  /** `redis://[user:password@]host:port[/db]` or `rediss://` for TLS. */
  readonly url?: string;
  /** An ioredis client (a single Redis, not a Cluster). */
  readonly client?: Redis;
  readonly password?: string;
  readonly username?: string;
  readonly tls?: boolean | Record<string, unknown>;
}

/**
 * Opens the connection of `where`, refusing a Cluster or Sentinel (one Redis server per region)
 * and a URL that is not one.
 */
export function openRegionClient(
  where: string,
  options: RegionConnection & { readonly cluster?: unknown; readonly sentinels?: unknown },
  timeouts: { commandTimeout: number; connectTimeout: number },
): { client: Redis; owned: boolean; address: string } {
  if (options.cluster !== undefined || options.sentinels !== undefined) {
    throw new InvalidOptionError(
      `${where}: each region is one Redis server (give url or client); ${options.cluster !== undefined ? 'a Redis Cluster' : 'Redis Sentinel'} per region is not supported — the decision script and the replicator touch several keys of different hash slots`,
    );
  }
  const sources = (['url', 'client'] as const).filter((name) => options[name] !== undefined);
  if (sources.length !== 1) {
    throw new InvalidOptionError(`${where}: give exactly one of url or client (got ${sources.length === 0 ? 'none' : sources.join(' and ')})`);
  }
  if (options.url !== undefined && (typeof options.url !== 'string' || !/^rediss?:\/\//.test(options.url))) {
    throw new InvalidOptionError(`${where}: url must look like redis://host:port or rediss://host:port, got ${describeValue(options.url)}`);
  }
  if (options.client !== undefined && !(options.client instanceof Redis)) {
    throw new InvalidOptionError(`${where}: client must be an ioredis Redis (not a Cluster), got ${describeValue(options.client)}`);
  }
  const opened = openClient(options as RedisStoreOptions, timeouts);
  return { client: opened.client as Redis, owned: opened.owned, address: opened.address };
}

/** EVALSHA, sending the script again (EVAL) if Redis lost it (restart, SCRIPT FLUSH). */
export async function evaluate(client: Redis, script: Script, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
  try {
    return await client.evalsha(script.sha1, keys.length, ...keys, ...args);
  } catch (error) {
    if (!(error instanceof Error) || error.message.split(' ', 1)[0] !== 'NOSCRIPT') throw error;
    return client.eval(script.source, keys.length, ...keys, ...args);
  }
}
