/**
 * An express-rate-limit `Store` backed by a Tollgate store, so an express-rate-limit user moves
 * their counters to Tollgate's memory store, Redis or Redis Cluster with one line:
 *
 * ```ts
 * rateLimit({ windowMs: 60_000, limit: 100, store: new TollgateStore({ store: redisStore({ url }) }) })
 * ```
 *
 * express-rate-limit keeps deciding (it compares `totalHits` with its own `limit`); Tollgate only
 * counts, exactly and atomically, in a fixed window of express-rate-limit's `windowMs` that starts
 * at a key's first hit (as express-rate-limit's own stores count) and whose limit is too large to
 * ever deny. The types express-rate-limit expects are declared here structurally, so this module
 * (and its .d.ts) does not depend on express-rate-limit.
 */
import type { Decision } from '../decision.js';
import { InvalidKeyError, InvalidOptionError, describeValue } from '../errors.js';
import { createLimiterCore, type LimiterCore } from '../limiter/index.js';
import { compilePolicy, type CompiledPolicy } from '../policy.js';
import type { Store } from '../store/types.js';
import { checkOptions, checkWholeNumber } from '../options.js';

/** Options of {@link TollgateStore}. */
export interface TollgateStoreOptions {
  /**
   * The Tollgate store that keeps the counts: `memoryStore()`, `redisStore({ url })` or
   * `redisStore({ cluster })`. One store may serve several TollgateStores; TollgateStore never
   * closes it (close it yourself when the app shuts down).
   */
  readonly store: Store;
  /**
   * Prepended to every key express-rate-limit passes. Default `erl:`. Limiters with the same
   * `windowMs` and the same prefix share their counts, so give each limiter its own prefix.
   */
  readonly prefix?: string;
  /** Decision time in epoch ms (tests, replays); default: the store's clock. */
  readonly clock?: () => number;
  /**
   * Longest wait for the store per request, in ms (default 50, or the store's `deadlineMs`). A
   * store that fails, is slower, or whose circuit breaker is open makes `increment` reject at once,
   * so express-rate-limit's own `passOnStoreError` decides what the request gets.
   */
  readonly deadlineMs?: number;
}

/** The express-rate-limit options TollgateStore reads in {@link TollgateStore.init}. */
export interface RateLimitStoreInitOptions {
  /** The window in milliseconds (express-rate-limit's `windowMs`). */
  readonly windowMs: number;
  /** express-rate-limit's `limit`: a number is checked against what TollgateStore can count. */
  readonly limit?: unknown;
}

/** A client's count, as express-rate-limit's `ClientRateLimitInfo` has it. */
export interface RateLimitClientInfo {
  /** Hits in the current window, refunded hits (`decrement`) taken off. */
  totalHits: number;
  /** When the window ends: `windowMs` after the key's first hit of the window. */
  resetTime: Date | undefined;
}

const OPTION_NAMES: ReadonlySet<string> = new Set(['store', 'prefix', 'clock', 'deadlineMs']);
const DEFAULT_PREFIX = 'erl:';
/**
 * Ends the key of a key's refund counter. `#` (and `%`) are percent-escaped in the keys
 * express-rate-limit passes, so no hit counter's key can end up equal to a refund counter's.
 */
const REFUNDS_SUFFIX = '#refunds';
const NEEDS_ESCAPE = /[%#]/;
/** express-rate-limit's default `windowMs`, used until `init` gives the limiter's own. */
const DEFAULT_WINDOW_MS = 60_000;
/**
 * The counters count up to ⌊2^53 / windowMs⌋ − 1 hits per window (the policy rule
 * `(limit + 1) × window ≤ 2^53 − 1`); asking for at least this many bounds `windowMs` to about
 * 104 days.
 */
const MIN_COUNTABLE_HITS = 1_000_000;
const MAX_WINDOW_MS = Math.floor(Number.MAX_SAFE_INTEGER / (MIN_COUNTABLE_HITS + 1));

/**
 * express-rate-limit's `Store` on a Tollgate store. Create one per `rateLimit(...)` (express-rate-
 * limit refuses to share a store instance); they may all use the same Tollgate store.
 *
 * Each key has two first-hit fixed-window counters: hits (`increment`) and refunds (`decrement`,
 * used by `skipFailedRequests` / `skipSuccessfulRequests`), because Tollgate stores only ever add.
 * `totalHits` is hits − refunds. A refund is recorded at the instant the hits window started, so
 * the refunds window is the hits window to the millisecond and ends with it; its limit is the hits
 * counted, so refunds never take `totalHits` below 0 (as express-rate-limit's MemoryStore), even
 * when several race. `increment` and `get` read both counters in one store round trip (one batch
 * on a single Redis; two parallel calls on a Cluster, where they hash to different slots);
 * `decrement` takes two (it reads the window's start first).
 *
 * Until `init` runs, the window is express-rate-limit's default (one minute), so every method works
 * on a store used outside `rateLimit`, as express-rate-limit's stores do. `resetAll` forgets every
 * key of this store's `prefix` (on Redis a SCAN of the keyspace: for administration, not requests).
 * Store errors (Redis down, timeouts) reject, so express-rate-limit's `passOnStoreError` applies.
 */
export class TollgateStore {
  /** Prepended to every key; express-rate-limit reads it to detect double counting. */
  readonly prefix: string;
  /** The counts are shared by every process using the same Tollgate store. */
  readonly localKeys = false;
  private readonly limiter: LimiterCore;
  /** A first-hit fixed window of `windowMs` that never denies; `init` sets express-rate-limit's. */
  private policy: CompiledPolicy | undefined = counterPolicy({ windowMs: DEFAULT_WINDOW_MS });
  /** Why `init` failed: every call rejects with it (express-rate-limit only logs init errors). */
  private initError: Error | undefined;

  constructor(options: TollgateStoreOptions) {
    checkOptions('TollgateStore', options, OPTION_NAMES, '{ store: redisStore({ url }) }');
    const { store } = options;
    if (typeof store !== 'object' || store === null || typeof store.consume !== 'function' || typeof store.peek !== 'function' || typeof store.reset !== 'function' || typeof store.resetPrefix !== 'function') {
      throw new InvalidOptionError(`TollgateStore: store must be a Tollgate store such as memoryStore() or redisStore({ url }), got ${describeValue(store)}`);
    }
    const prefix = options.prefix ?? DEFAULT_PREFIX;
    if (typeof prefix !== 'string') {
      throw new InvalidOptionError(`TollgateStore: prefix must be a string like "erl:login:", got ${describeValue(prefix)}`);
    }
    this.prefix = prefix;
    if (options.clock !== undefined && typeof options.clock !== 'function') {
      throw new InvalidOptionError(`TollgateStore: clock must be a function returning epoch ms, got ${describeValue(options.clock)}`);
    }
    this.limiter = createLimiterCore({
      store,
      failureMode: 'throw',
      ...(options.clock !== undefined ? { clock: options.clock } : {}),
      ...(options.deadlineMs !== undefined ? { deadlineMs: options.deadlineMs } : {}),
    });
  }

  /** Called by express-rate-limit with its options: takes the window from `windowMs`. */
  init(options: RateLimitStoreInitOptions): void {
    this.policy = undefined;
    this.initError = undefined;
    try {
      this.policy = counterPolicy(options);
    } catch (error) {
      this.initError = error as Error;
      throw error;
    }
  }

  /** Counts one hit for `key`; resolves to the window's hits (refunds taken off) and its end. */
  async increment(key: string): Promise<RateLimitClientInfo> {
    const policy = this.counterPolicy();
    const hitsKey = this.hitsKey(key);
    // Both issued before any await: the Redis store sends requests of one tick in one batch.
    const [hits, refunds] = await Promise.all([
      this.limiter.limit(hitsKey, policy),
      this.limiter.peek(hitsKey + REFUNDS_SUFFIX, policy),
    ]);
    // This hit itself is counted, whatever a late refund says (express-rate-limit wants ≥ 1).
    return { totalHits: Math.max(1, counted(hits, policy, false) - counted(refunds, policy, true)), resetTime: new Date(hits.resetAt) };
  }

  /**
   * Refunds one hit of `key` in its current window (express-rate-limit's skip*Requests); nothing
   * when the key has no hits in this window, or as many refunds as hits.
   */
  async decrement(key: string): Promise<void> {
    const policy = this.counterPolicy();
    const hitsKey = this.hitsKey(key);
    const hits = await this.limiter.peek(hitsKey, policy);
    const hitCount = counted(hits, policy, true);
    if (hitCount === 0) return;
    // At the hits window's start: a fresh refunds window starts there too and ends with it.
    const start = hits.resetAt - policy.windowMs;
    const refunds = compilePolicy({ algorithm: 'fixed-window', limit: hitCount, window: policy.windowMs, windowStart: 'first-hit' });
    await this.limiter.limit(hitsKey + REFUNDS_SUFFIX, refunds, { now: start });
  }

  /** Forgets `key`'s hits and refunds. */
  async resetKey(key: string): Promise<void> {
    const policy = this.counterPolicy();
    const hitsKey = this.hitsKey(key);
    await Promise.all([this.limiter.reset(hitsKey, policy), this.limiter.reset(hitsKey + REFUNDS_SUFFIX, policy)]);
  }

  /**
   * Forgets every key of this store's `prefix`, hits and refunds (keys of other prefixes, and of
   * Tollgate's own limiters, stay). Refused with an empty prefix, which would forget every key.
   */
  async resetAll(): Promise<void> {
    if (this.prefix === '') {
      throw new InvalidOptionError('TollgateStore.resetAll needs a prefix: with prefix "" it would forget every key of the Tollgate store; give the TollgateStore a prefix like "erl:login:"');
    }
    await this.limiter.resetPrefix(this.prefix);
  }

  /** `key`'s count without counting a hit; undefined when it has no hits in this window. */
  async get(key: string): Promise<RateLimitClientInfo | undefined> {
    const policy = this.counterPolicy();
    const hitsKey = this.hitsKey(key);
    const [hits, refunds] = await Promise.all([
      this.limiter.peek(hitsKey, policy),
      this.limiter.peek(hitsKey + REFUNDS_SUFFIX, policy),
    ]);
    const hitCount = counted(hits, policy, true);
    if (hitCount === 0) return undefined;
    return { totalHits: Math.max(0, hitCount - counted(refunds, policy, true)), resetTime: new Date(hits.resetAt) };
  }

  private counterPolicy(): CompiledPolicy {
    if (this.policy !== undefined) return this.policy;
    throw this.initError!;
  }

  private hitsKey(key: string): string {
    if (typeof key !== 'string') throw new InvalidKeyError(`TollgateStore: key must be a string, got ${describeValue(key)}`);
    if (!NEEDS_ESCAPE.test(key)) return this.prefix + key;
    return this.prefix + key.replace(/%/g, '%25').replace(/#/g, '%23');
  }
}

/** A fixed window of `windowMs` with the largest limit that still counts exactly: it never denies. */
function counterPolicy(options: RateLimitStoreInitOptions): CompiledPolicy {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError(`TollgateStore.init needs express-rate-limit's options, got ${describeValue(options)}`);
  }
  const windowMs = checkWholeNumber(options.windowMs, { name: 'TollgateStore: windowMs', min: 1, unit: 'milliseconds' });
  if (windowMs > MAX_WINDOW_MS) {
    throw new InvalidOptionError(
      `TollgateStore: windowMs ${windowMs} is too long to count at least ${MIN_COUNTABLE_HITS} hits exactly; use a window of at most ${MAX_WINDOW_MS} ms`,
    );
  }
  const capacity = Math.floor(Number.MAX_SAFE_INTEGER / windowMs) - 1;
  if (typeof options.limit === 'number' && options.limit >= capacity) {
    throw new InvalidOptionError(
      `TollgateStore: limit ${options.limit} is not below the ${capacity} hits it can count in a window of ${windowMs} ms; use a lower limit or a shorter window`,
    );
  }
  return compilePolicy({ algorithm: 'fixed-window', limit: capacity, window: windowMs, windowStart: 'first-hit' });
}

/**
 * Hits recorded in the window, from a decision of cost 1. A consume reports what is left with its
 * own hit counted (a denied one records nothing); a peek reports what would be left after one
 * more hit, unless the window is full.
 */
function counted(decision: Decision, policy: CompiledPolicy, peeked: boolean): number {
  const used = policy.limit - decision.remaining;
  return peeked && decision.allowed ? used - 1 : used;
}
