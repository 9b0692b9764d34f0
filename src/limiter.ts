/**
 * The engine: validates what callers pass, compiles policies once, and asks the store.
 * `limit(key, policy, { cost, now })` decides and records, `peek` decides without recording,
 * `reset` forgets a key.
 */
import { limitZero } from './algorithms/outcome.js';
import { currentTime } from './clock.js';
import type { Decision } from './decision.js';
import { InvalidCostError, InvalidKeyError, InvalidOptionError, InvalidTimeError, describeValue } from './errors.js';
import { MAX_KEY_BYTES } from './keys.js';
import { PolicyCache, type CompiledPolicy, type Policy } from './policy.js';
import { check, type CheckRequest, type CheckResult } from './rules/check.js';
import type { RuleSource } from './rules/ruleset.js';
import { memoryStore } from './store/memory.js';
import type { MaybePromise, Store, StoreRequest } from './store/types.js';

/** Options of {@link createLimiter}. */
export interface LimiterOptions {
  /** Where state lives. Default: a new {@link memoryStore}. */
  readonly store?: Store;
  /**
   * Time source (epoch ms) used when a call passes no `now`. Default: the store's own time
   * (the process clock for the memory store, Redis `TIME` for Redis).
   */
  readonly clock?: () => number;
  /** Rules for {@link Limiter.check}: a RuleSet (`loadRules`) or a holder that hot-reloads them. */
  readonly rules?: RuleSource;
}

/** Per-call options. */
export interface LimitOptions {
  /** Units this request takes (its weight): an integer ≥ 1. Default 1. */
  readonly cost?: number;
  /** Decision time in epoch ms (tests, replays). Default: the limiter's clock or the store's time. */
  readonly now?: number;
}

/** One limit of a multi-limit check ({@link Limiter.limitAll}). */
export interface LimitRequest {
  readonly key: string;
  readonly policy: Policy | CompiledPolicy;
  /** Units this request takes under this limit (integer ≥ 1). Default 1. */
  readonly cost?: number;
}

/** Most limits in one {@link Limiter.limitAll} call. */
export const MAX_LIMITS_PER_CHECK = 64;

export { MAX_KEY_BYTES };
/** Any string of at most this many UTF-16 units is at most MAX_KEY_BYTES in UTF-8. */
const ALWAYS_SHORT_ENOUGH = Math.floor(MAX_KEY_BYTES / 3);
const LIMITER_OPTIONS: ReadonlySet<string> = new Set(['store', 'clock', 'rules']);

export interface Limiter {
  /** Decides one request and records it if admitted. Never rejects to mean "denied". */
  limit(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions): Promise<Decision>;
  /** What `limit` would answer for the same arguments, recording nothing. */
  peek(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions): Promise<Decision>;
  /**
   * Decides several limits of one request together (say per IP and per user), all-or-nothing: the
   * request is admitted when every decision is, and if any denies, no limit records anything (a
   * denied sliding-log attempt with `countRejected` is still logged). One store round trip.
   */
  limitAll(requests: readonly LimitRequest[], options?: Pick<LimitOptions, 'now'>): Promise<Decision[]>;
  /**
   * envoy's ShouldRateLimit: matches each descriptor of `request` against the rules and decides all
   * matched limits in one store round trip. Needs `rules` at construction.
   */
  check(request: CheckRequest): Promise<CheckResult>;
  /** Forgets `key`'s state under `policy` (its algorithm and window). */
  reset(key: string, policy: Policy | CompiledPolicy): Promise<void>;
  /** The store decisions go to. */
  readonly store: Store;
  /** Closes the store. */
  close(): Promise<void>;
}

/** Creates a limiter on `store` (the embedded memory store by default). */
export function createLimiter(options: LimiterOptions = {}): Limiter {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError(`createLimiter options must be an object, got ${describeValue(options)}`);
  }
  for (const name of Object.keys(options)) {
    if (!LIMITER_OPTIONS.has(name)) {
      throw new InvalidOptionError(`createLimiter: unknown option ${JSON.stringify(name)}; the options are ${[...LIMITER_OPTIONS].join(', ')}`);
    }
  }
  if (options.clock !== undefined && typeof options.clock !== 'function') {
    throw new InvalidOptionError(`createLimiter: clock must be a function returning epoch ms, got ${describeValue(options.clock)}`);
  }
  const store = options.store === undefined ? memoryStore() : options.store;
  if (typeof store !== 'object' || store === null || typeof store.consume !== 'function') {
    throw new InvalidOptionError(`createLimiter: store must be a Store such as memoryStore() or redisStore(...), got ${describeValue(store)}`);
  }
  const rules = options.rules;
  if (rules !== undefined && (typeof rules !== 'object' || rules === null || !('current' in rules))) {
    throw new InvalidOptionError(`createLimiter: rules must come from loadRules(...) or a RulesHolder, got ${describeValue(rules)}`);
  }
  return new RateLimiter(store, options.clock, rules);
}

class RateLimiter implements Limiter {
  private readonly policies = new PolicyCache();

  constructor(
    readonly store: Store,
    private readonly clock: (() => number) | undefined,
    private readonly rules: RuleSource | undefined,
  ) {}

  check(request: CheckRequest): Promise<CheckResult> {
    if (this.rules === undefined) {
      return Promise.reject(new InvalidOptionError('check() needs rules: createLimiter({ store, rules: await loadRules(path) })'));
    }
    try {
      return check(this, this.rules.current, request);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  limit(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions): Promise<Decision> {
    return this.run(key, policy, options, true);
  }

  peek(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions): Promise<Decision> {
    return this.run(key, policy, options, false);
  }

  reset(key: string, policy: Policy | CompiledPolicy): Promise<void> {
    try {
      checkKey(key);
      return Promise.resolve(this.store.reset(key, this.policies.get(policy)));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  close(): Promise<void> {
    return this.store.close();
  }

  limitAll(requests: readonly LimitRequest[], options?: Pick<LimitOptions, 'now'>): Promise<Decision[]> {
    try {
      if (!Array.isArray(requests) || requests.length > MAX_LIMITS_PER_CHECK) {
        throw new InvalidOptionError(`limitAll takes an array of at most ${MAX_LIMITS_PER_CHECK} { key, policy, cost? }, got ${describeValue(requests)}${Array.isArray(requests) ? ` of ${requests.length}` : ''}`);
      }
      let now: number | undefined;
      if (options !== undefined) {
        checkCallOptions(options);
        if (options.now !== undefined) now = checkNow(options.now);
      }
      if (now === undefined && this.clock !== undefined) now = checkNow(this.clock());
      const storeRequests: StoreRequest[] = [];
      let denyAll = false;
      for (const request of requests) {
        if (typeof request !== 'object' || request === null) {
          throw new InvalidOptionError(`limitAll: each request must be { key, policy, cost? }, got ${describeValue(request)}`);
        }
        checkKey(request.key);
        const policy = this.policies.get(request.policy);
        const cost = request.cost === undefined ? 1 : checkCost(request.cost);
        if (policy.limit === 0) denyAll = true;
        else storeRequests.push({ key: request.key, policy, cost });
      }
      if (requests.length === 0) return Promise.resolve([]);
      // A limit of 0 denies the whole request: the others are only looked at, never recorded.
      const decided = storeRequests.length === 0 ? [] : this.store.consumeAll(storeRequests, now, !denyAll);
      return Promise.resolve(decided).then((decisions) => {
        if (!denyAll) return decisions;
        const time = now ?? currentTime();
        let next = 0;
        return requests.map((request) => {
          const policy = this.policies.get(request.policy);
          return policy.limit === 0 ? limitZero(policy, time) : decisions[next++]!;
        });
      });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  // Not async: a memory-store decision is settled without an extra microtask hop.
  private run(key: string, policy: Policy | CompiledPolicy, options: LimitOptions | undefined, commit: boolean): Promise<Decision> {
    try {
      checkKey(key);
      const compiled = this.policies.get(policy);
      let cost = 1;
      let now: number | undefined;
      if (options !== undefined) {
        checkCallOptions(options);
        if (options.cost !== undefined) cost = checkCost(options.cost);
        if (options.now !== undefined) now = checkNow(options.now);
      }
      if (now === undefined && this.clock !== undefined) now = checkNow(this.clock());
      if (compiled.limit === 0) return Promise.resolve(limitZero(compiled, now ?? currentTime()));
      const decision: MaybePromise<Decision> = commit
        ? this.store.consume(key, compiled, cost, now)
        : this.store.peek(key, compiled, cost, now);
      return decision instanceof Promise ? decision : Promise.resolve(decision);
    } catch (error) {
      return Promise.reject(error);
    }
  }
}

function checkKey(key: unknown): void {
  if (typeof key !== 'string') throw new InvalidKeyError(`key must be a string, got ${describeValue(key)}`);
  if (key.length === 0) throw new InvalidKeyError('key is empty; identify the caller (e.g. "ip:203.0.113.7" or "user:42")');
  if (key.length > ALWAYS_SHORT_ENOUGH && Buffer.byteLength(key, 'utf8') > MAX_KEY_BYTES) {
    throw new InvalidKeyError(
      `key is ${Buffer.byteLength(key, 'utf8')} bytes, over the ${MAX_KEY_BYTES}-byte limit; hash long identities (e.g. a SHA-256 of a token) before limiting`,
    );
  }
}

function checkCallOptions(options: unknown): void {
  if (typeof options !== 'object' || options === null) {
    throw new InvalidOptionError(`call options must be an object like { cost: 1, now: Date.now() }, got ${describeValue(options)}`);
  }
  for (const name in options) {
    if (name !== 'cost' && name !== 'now') {
      throw new InvalidOptionError(`unknown call option ${JSON.stringify(name)}; the options are cost and now`);
    }
  }
}

function checkCost(cost: unknown): number {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1) {
    throw new InvalidCostError(`cost must be a whole number ≥ 1, got ${describeValue(cost)}`);
  }
  return cost;
}

function checkNow(now: unknown): number {
  if (typeof now !== 'number' || !Number.isFinite(now) || now < 0 || now > Number.MAX_SAFE_INTEGER) {
    throw new InvalidTimeError(`now must be a finite epoch time in milliseconds ≥ 0, got ${describeValue(now)}`);
  }
  return Math.floor(now);
}
