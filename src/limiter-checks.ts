/**
 * What the limiter checks of every call before a store sees it: keys, costs, times and per-call
 * options. Bad input throws a typed error that says what to pass instead.
 */
import { checkDeadline, checkFailureMode } from './fault/failure-mode.js';
import { InvalidCostError, InvalidKeyError, InvalidOptionError, InvalidTimeError, describeValue } from './errors.js';
import { MAX_KEY_BYTES, wellFormedKey } from './keys.js';
import { checkOptions } from './options.js';

/** Any string of at most this many UTF-16 units is at most MAX_KEY_BYTES in UTF-8. */
const ALWAYS_SHORT_ENOUGH = Math.floor(MAX_KEY_BYTES / 3);

/** The per-call options the limiter checks (LimitOptions in limiter.ts). */
export interface CheckedCallOptions {
  readonly failureMode?: unknown;
  readonly deadlineMs?: unknown;
  readonly lease?: unknown;
  readonly syncIntervalMs?: unknown;
}

/** The key every store counts under (see {@link wellFormedKey}), or an InvalidKeyError. */
export function checkKey(key: unknown): string {
  if (typeof key !== 'string') throw new InvalidKeyError(`key must be a string, got ${describeValue(key)}`);
  if (key.length === 0) throw new InvalidKeyError('key is empty; identify the caller (e.g. "ip:203.0.113.7" or "user:42")');
  if (key.length > ALWAYS_SHORT_ENOUGH && Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) {
    throw new InvalidKeyError(
      `key is ${Buffer.byteLength(key, 'utf8')} bytes, over the ${MAX_KEY_BYTES}-byte limit; hash long identities (e.g. a SHA-256 of a token) before limiting`,
    );
  }
  return wellFormedKey(key);
}

const CALL_OPTIONS: readonly string[] = ['cost', 'now', 'failureMode', 'deadlineMs', 'lease', 'syncIntervalMs'];

export function checkCallOptions(options: CheckedCallOptions): void {
  checkOptions('call', options, CALL_OPTIONS, '{ cost: 1, now: Date.now() }', 'call option');
  if (options.failureMode !== undefined) checkFailureMode(options.failureMode, 'failureMode');
  if (options.deadlineMs !== undefined) checkDeadline(options.deadlineMs, 'deadlineMs');
  if (options.lease !== undefined) checkLease(options.lease, 'lease');
  if (options.syncIntervalMs !== undefined) checkSyncInterval(options.syncIntervalMs, 'syncIntervalMs');
  if (options.lease !== undefined && options.syncIntervalMs !== undefined) {
    throw new InvalidOptionError('give lease or syncIntervalMs (local-first), not both: they are two ways of deciding a key without the store');
  }
}

/** Shortest and longest local-first sync interval, ms. */
export const MIN_SYNC_INTERVAL_MS = 10;
export const MAX_SYNC_INTERVAL_MS = 60_000;

export function checkSyncInterval(interval: unknown, where: string): number {
  if (typeof interval !== 'number' || !Number.isSafeInteger(interval) || interval < MIN_SYNC_INTERVAL_MS || interval > MAX_SYNC_INTERVAL_MS) {
    throw new InvalidOptionError(
      `${where} (local-first) must be a whole number of ms from ${MIN_SYNC_INTERVAL_MS} to ${MAX_SYNC_INTERVAL_MS}: how often a node syncs its counts with the store, got ${describeValue(interval)}`,
    );
  }
  return interval;
}

export function checkLease(lease: unknown, where: string): number {
  if (typeof lease !== 'number' || !Number.isSafeInteger(lease) || lease < 2 || lease > 1_000_000) {
    throw new InvalidOptionError(`${where} must be a whole number of units from 2 to 1000000 (taken from the store at once), got ${describeValue(lease)}`);
  }
  return lease;
}

export function checkCost(cost: unknown): number {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1) {
    throw new InvalidCostError(`cost must be a whole number ≥ 1, got ${describeValue(cost)}`);
  }
  return cost;
}

export function checkNow(now: unknown): number {
  if (typeof now !== 'number' || !Number.isFinite(now) || now < 0 || now > Number.MAX_SAFE_INTEGER) {
    throw new InvalidTimeError(`now must be a finite epoch time in milliseconds ≥ 0, got ${describeValue(now)}`);
  }
  return Math.floor(now);
}
