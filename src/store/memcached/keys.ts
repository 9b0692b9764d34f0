/**
 * Memcached key names, item lifetimes and the text a state is stored as.
 * A key is `<prefix>k:<caller's key>|<state id>` when that is printable ASCII within memcached's
 * 250 bytes, else `<prefix>h:<SHA-256 of the caller's key, base64url>|<state id>`: the two forms
 * never meet (`k:` / `h:`), so a hashed name never names a literal key.
 */
import { createHash } from 'node:crypto';
import { bucketStateSize } from '../../algorithms/sliding-window-buckets.js';
import { slotAlgorithms } from '../../algorithms/registry.js';
import { StoreDataError } from '../../errors.js';
import type { CompiledPolicy } from '../../policy.js';
import { MAX_KEY_BYTES } from './options.js';

const PRINTABLE = /^[\x21-\x7e]+$/;

/** The memcached key holding `key`'s state under `policy`. */
export function memcachedKey(prefix: string, key: string, policy: CompiledPolicy): string {
  return itemName(prefix, key, policy.stateId);
}

/** The memcached key holding `key`'s concurrency slots: `slots` is no algorithm's state id. */
export function slotsItemName(prefix: string, key: string): string {
  return itemName(prefix, key, 'slots');
}

function itemName(prefix: string, key: string, stateId: string): string {
  const literal = `${prefix}k:${key}|${stateId}`;
  if (literal.length <= MAX_KEY_BYTES && PRINTABLE.test(literal)) return literal;
  return `${prefix}h:${createHash('sha256').update(key).digest('base64url')}|${stateId}`;
}

/** Memcached's bound on a relative exptime (30 days, in s): past it, an exptime is a Unix time. */
const RELATIVE_LIMIT_S = 30 * 86_400;
/** How far an explicit `now` may lag this node's clock and still keep its keys that much longer (as on Redis). */
const MAX_REPLAY_LAG_MS = 3_600_000;
/** Real time kept past a state's lifetime: memcached expires whole seconds, so one more than Redis's slack. */
const SLACK_MS = 2_000;

/**
 * The exptime of state decided at `at` that matters until `until` (a decision's `resetAt`): its
 * lifetime in real time, plus how far an explicit `now` lags this node's clock (at most an hour,
 * so a replay keeps its keys), plus slack; in whole seconds, as a Unix time past 30 days, and 0
 * ("never", memcached's LRU alone may drop it) past 2038, where memcached's 32-bit times end.
 */
export function exptime(until: number, at: number, explicitNow: boolean): number {
  return exptimeAt(realUntil(until, at, explicitNow));
}

/**
 * The instant of this node's clock until which state decided at `at` (the call's timeline) that
 * matters until `until` must be kept: its lifetime in real time, plus how far an explicit `now`
 * lags this node's clock (at most an hour).
 */
export function realUntil(until: number, at: number, explicitNow: boolean): number {
  const clock = Date.now();
  const lag = explicitNow ? Math.min(Math.max(clock - at, 0), MAX_REPLAY_LAG_MS) : 0;
  return clock + Math.max(until - at, 0) + lag;
}

/** The exptime of an item to be kept until `instant` of this node's clock (see {@link exptime}). */
export function exptimeAt(instant: number): number {
  const seconds = Math.max(1, Math.ceil((Math.max(instant - Date.now(), 0) + SLACK_MS) / 1000));
  if (seconds <= RELATIVE_LIMIT_S) return seconds;
  const unixTime = Math.floor(Date.now() / 1000) + seconds;
  return unixTime < 2 ** 31 ? unixTime : 0;
}

/** How many numbers `policy`'s state holds (the slot algorithms' layouts; a sliding window of N buckets, N + 2). */
export function stateSize(policy: CompiledPolicy): number {
  if (policy.algorithm === 'sliding-log') throw new Error('sliding-log keeps no fixed-size state');
  return policy.precision > 1 ? bucketStateSize(policy) : slotAlgorithms[policy.algorithm].stateSize;
}

/** State as stored: its numbers, comma-separated (JavaScript's shortest round-trip form). */
export function encodeState(state: Float64Array): string {
  return Array.prototype.join.call(state, ',');
}

/** Reads state written by {@link encodeState} into `into`; anything else is another writer's value. */
export function decodeState(key: string, text: string, into: Float64Array): void {
  const parts = text.split(',');
  if (parts.length !== into.length) throw foreignValue(key, text);
  for (let i = 0; i < parts.length; i++) {
    const value = Number(parts[i]);
    if (parts[i] === '' || !Number.isFinite(value)) throw foreignValue(key, text);
    into[i] = value;
  }
}

export function foreignValue(key: string, text: string): StoreDataError {
  const shown = text.length > 40 ? `${text.slice(0, 40)}…` : text;
  return new StoreDataError(key, `memcached key ${key} holds ${JSON.stringify(shown)}, which Tollgate did not write: another application shares the key prefix; give Tollgate its own (keyPrefix)`);
}
