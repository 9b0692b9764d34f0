/**
 * Each call's options (their types) and what the limiter checks of every call before a store sees
 * it: keys, costs, times and per-call options. Bad input throws a typed error that says what to
 * pass instead.
 */
import { checkDeadline, checkFailureMode, type LimiterFailureMode } from './failure-modes.js';
import { InvalidCostError, InvalidKeyError, InvalidOptionError, InvalidTimeError, describeValue } from '../errors.js';
import { MAX_KEY_BYTES, wellFormedKey } from '../keys.js';
import { checkOptions, checkWholeNumber } from '../options.js';
import type { AlgorithmName, CompiledPolicy, Policy } from '../policy.js';

/** Per-call options. */
export interface LimitOptions {
  /** Units this request takes (its weight): an integer ≥ 1. Default 1. */
  readonly cost?: number;
  /** Decision time in epoch ms (tests, replays). Default: the limiter's clock or the store's time. */
  readonly now?: number;
  /** This call's failure mode (see {@link LimiterCoreOptions.failureMode}). */
  readonly failureMode?: LimiterFailureMode;
  /** This call's deadline in ms (see {@link LimiterCoreOptions.deadlineMs}). */
  readonly deadlineMs?: number;
  /**
   * Token lease (2 to 1,000,000): take this many units from the store in one call and admit the
   * next requests for this key from them in-process (limiter/leases.ts: never over the limit, some
   * under-admission). `limit` only; fixed-window and sliding-window policies only (a lease on
   * another algorithm, or on a `countRejected` policy, is an InvalidOptionError).
   */
  readonly lease?: number;
  /**
   * Local-first (10 to 60,000 ms): decide this key in-process on this node's view of the counter,
   * synced with the store every `syncIntervalMs` (limiter/local-first.ts: no store round trip, some
   * over-admission). `limit` only; fixed-window and sliding-window policies only.
   */
  readonly syncIntervalMs?: number;
  /**
   * The request's id, for policies with a usage ledger (limiter/ledger.ts): a retry repeating it is
   * billed once (the decision itself still counts it). 1 to 200 characters.
   */
  readonly requestId?: string;
}

/** Options of a multi-limit call. */
export type LimitAllOptions = Pick<LimitOptions, 'now' | 'failureMode' | 'deadlineMs' | 'requestId'>;

/** One limit of a multi-limit check (the limiter's `limitAll`). */
export interface LimitRequest {
  readonly key: string;
  readonly policy: Policy | CompiledPolicy;
  /** Units this request takes under this limit (integer ≥ 1). Default 1. */
  readonly cost?: number;
  /** This limit's failure mode, over the call's and the limiter's. */
  readonly failureMode?: LimiterFailureMode;
  /** A token lease for this limit (see {@link LimitOptions.lease}); used when it is the call's only limit. */
  readonly lease?: number;
  /** Local-first for this limit (see {@link LimitOptions.syncIntervalMs}); used when it is the call's only limit. */
  readonly syncIntervalMs?: number;
}

/**
 * What a decision does: `limit` decides and records, `peek` decides without recording, `look`
 * reports the quota as it stands without spending it and is never refused (a request of cost 0:
 * the middleware's `cost: 0`, a rules check with `spend: false`), `probe` asks whether a request of
 * cost 0 passes: denied only when the quota is overdrawn (a fixed window with `countRejected`
 * past its limit; envoy's `hits_addend: 0`), recording nothing.
 */
export type DecideMode = 'limit' | 'peek' | 'look' | 'probe';

/** Any string of at most this many UTF-16 units is at most MAX_KEY_BYTES in UTF-8. */
const ALWAYS_SHORT_ENOUGH = Math.floor(MAX_KEY_BYTES / 3);

/** The per-call options the limiter checks ({@link LimitOptions}). */
export interface CheckedCallOptions {
  readonly failureMode?: unknown;
  readonly deadlineMs?: unknown;
  readonly lease?: unknown;
  readonly syncIntervalMs?: unknown;
  readonly requestId?: unknown;
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

const CALL_OPTIONS: readonly string[] = ['cost', 'now', 'failureMode', 'deadlineMs', 'lease', 'syncIntervalMs', 'requestId'];

export function checkCallOptions(options: CheckedCallOptions): void {
  checkOptions('call', options, CALL_OPTIONS, '{ cost: 1, now: Date.now() }', 'call option');
  if (options.failureMode !== undefined) checkFailureMode(options.failureMode, 'failureMode');
  if (options.deadlineMs !== undefined) checkDeadline(options.deadlineMs, 'deadlineMs');
  if (options.requestId !== undefined) checkRequestId(options.requestId);
  checkLocalModes(options, '');
}

/**
 * The two ways of deciding a key without the store (a lease, local-first), checked alike on every
 * entry point (`limit`, and each limit of `limitAll`): each in its range, and never both.
 */
export function checkLocalModes(options: Pick<CheckedCallOptions, 'lease' | 'syncIntervalMs'>, where: string): void {
  if (options.lease !== undefined) checkLease(options.lease, `${where}lease`);
  if (options.syncIntervalMs !== undefined) checkSyncInterval(options.syncIntervalMs, `${where}syncIntervalMs`);
  if (options.lease !== undefined && options.syncIntervalMs !== undefined) {
    throw new InvalidOptionError(`${where}give lease or syncIntervalMs (local-first), not both: they are two ways of deciding a key without the store`);
  }
}

/** Shortest and longest local-first sync interval, ms. */
export const MIN_SYNC_INTERVAL_MS = 10;
export const MAX_SYNC_INTERVAL_MS = 60_000;

export function checkSyncInterval(interval: unknown, where: string): number {
  return checkWholeNumber(interval, { name: `${where} (local-first)`, min: MIN_SYNC_INTERVAL_MS, max: MAX_SYNC_INTERVAL_MS, unit: 'ms', meaning: 'how often a node syncs its counts with the store' });
}

/** The algorithms whose caps a lease keeps (see the module's comment). */
export const LEASABLE_ALGORITHMS: readonly AlgorithmName[] = ['fixed-window', 'sliding-window'];

/** Why `mode` (a lease, local-first) cannot keep a penalty: it admits without asking the store, where the block is. */
export const PENALTY_DECIDED_LOCALLY = (mode: string, option: string): string =>
  `${mode} admits without asking the store, where a penalty (blockDuration) is kept, so a block would not be honoured: drop ${option} or blockDuration`;

/** Why `mode` cannot keep a fair share: the group's tenants are weighed in the store, at each decision. */
export const SHARE_DECIDED_LOCALLY = (mode: string, option: string): string =>
  `${mode} admits without asking the store, where a group's fair shares (share) are weighed, so the other tenants' shares would not be kept: drop ${option} or share`;

/**
 * Why a lease cannot keep `policy`'s caps, in words that name the alternative; undefined when it
 * can. One text for every entry point (the limiter, the middleware, the rules).
 */
function leaseRefusal(policy: Pick<CompiledPolicy, 'algorithm' | 'countRejected' | 'blockMs' | 'share'>): string | undefined {
  if (policy.share !== undefined) return SHARE_DECIDED_LOCALLY('a lease', 'lease');
  if (policy.blockMs > 0) return PENALTY_DECIDED_LOCALLY('a lease', 'lease');
  if (policy.countRejected) return 'a lease cannot keep a countRejected policy, which counts every attempt, refused ones too: drop lease or countRejected';
  if (LEASABLE_ALGORITHMS.includes(policy.algorithm)) return undefined;
  const why = policy.algorithm === 'leaky-bucket' ? 'its answer is a place in a queue, which a batch of permits cannot hand out' : policy.algorithm === 'sliding-log' ? 'its rolling window moves on while leased permits wait, so they would be spent beside requests admitted later, past the limit' : 'the bucket refills while leased permits wait, so they would be spent beside the new tokens, past the burst';
  return `a lease keeps the caps of fixed-window and sliding-window only, not ${policy.algorithm}: ${why}; use a fixed-window or sliding-window policy with the lease, or decide ${policy.algorithm} without one (the over-limit cache still spares the store its denials)`;
}

/** Throws the refusal of {@link leaseRefusal} for a lease asked on `policy`. */
export function checkLeasable(policy: Pick<CompiledPolicy, 'algorithm' | 'countRejected' | 'blockMs' | 'share'>, where: string): void {
  const refusal = leaseRefusal(policy);
  if (refusal !== undefined) throw new InvalidOptionError(`${where}: ${refusal}`);
}

export function checkLease(lease: unknown, where: string): number {
  return checkWholeNumber(lease, { name: where, min: 2, max: 1_000_000, unit: 'units', meaning: 'taken from the store at once' });
}

/** The longest request id the ledger remembers. */
export const MAX_REQUEST_ID_LENGTH = 200;

/** A request id as a call gives it: a non-empty string of at most 200 characters. */
export function checkRequestId(id: unknown): string {
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_REQUEST_ID_LENGTH) {
    throw new InvalidOptionError(`requestId must be a string of 1 to ${MAX_REQUEST_ID_LENGTH} characters (the id a client repeats when it retries), got ${describeValue(id)}`);
  }
  return id;
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
