/**
 * The local over-limit cache (envoy's "over limit with local cache"): once the store denies a key,
 * this process answers further requests for it itself until the answer could change — `now +
 * retryAfter` for the same cost — without a store round trip. Under attack, a denied key then
 * costs the store one call per retry period instead of one per request.
 *
 * The cached answer is the one the store would give, field for field: while a key is denied
 * nothing is recorded, so its state only moves with time, and the remembered denial is kept only
 * where that motion cannot change the answer before `until`:
 * - the same cost only (a larger cost may have a later retry, a smaller one may pass);
 * - `remaining` must stay what it was: true for a fixed window (constant until the window ends,
 *   which is when it admits again), and for any algorithm when nothing remains (it stays 0 until
 *   the retry instant, when one unit is back);
 * - never for policies that record denied attempts (`countRejected`: every attempt must reach the
 *   store), nor for special or degraded answers (`reason` set).
 * Other nodes' traffic only makes a denied key's real answer later, never sooner, so a cached
 * denial is never wrong in the store's favour; an administrator's reset is seen by the node that
 * made it at once and by the others at `until` at the latest.
 */
import type { Decision } from '../decision.js';
import { checkWholeNumber } from '../options.js';
import type { CompiledPolicy } from '../policy.js';
import type { MaybePromise, SettleRequest, Settlement } from '../store/types.js';
import type { DecideMode, LimitAllOptions, LimitOptions } from './checks.js';
import { PassThroughLayer, type DecisionLayer, type GroupRequest } from './layer.js';

export interface OverLimitCacheOptions {
  /** Most keys remembered; the least recently denied go first. Default 100,000. */
  readonly maxKeys?: number;
}

interface Entry {
  readonly policy: CompiledPolicy;
  readonly cost: number;
  /** The store's instant of the denial, and when it stops holding (its retry instant). */
  readonly from: number;
  readonly until: number;
  readonly decision: Decision;
  /** The store's clock minus this process's, when the store gave the time. */
  readonly offset: number;
}

/** Counters of the cache. */
export interface OverLimitCacheStats {
  /** Decisions answered by the cache (envoy's `over_limit_with_local_cache`). */
  readonly hits: number;
  /** Keys remembered now. */
  readonly keys: number;
  readonly maxKeys: number;
}

export class OverLimitCache {
  private readonly entries = new Map<string, Entry>();
  private readonly maxKeys: number;
  private hits = 0;

  constructor(
    options: OverLimitCacheOptions,
    private readonly clock: () => number,
  ) {
    this.maxKeys = checkWholeNumber(options.maxKeys ?? 100_000, { name: 'overLimitCache.maxKeys', min: 1 });
  }

  stats(): OverLimitCacheStats {
    return { hits: this.hits, keys: this.entries.size, maxKeys: this.maxKeys };
  }

  /** The denial still in force for `key` under `policy` at `now` (the caller's, else this clock), if one is. */
  lookup(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Decision | undefined {
    const id = entryId(key, policy);
    const entry = this.entries.get(id);
    if (entry === undefined || entry.policy !== policy || entry.cost !== cost) return undefined;
    const at = now ?? this.clock() + entry.offset;
    if (at >= entry.until) {
      this.entries.delete(id);
      return undefined;
    }
    // Earlier than the denial (a replay, a clock that went back): the store decides.
    if (at < entry.from) return undefined;
    this.hits += 1;
    const { limit, remaining, resetAt, delay } = entry.decision;
    const answer: Decision = { allowed: false, limit, remaining, resetAt, retryAfter: entry.until - at, now: at };
    if (entry.decision.reason === 'blocked') return { ...answer, reason: 'blocked' };
    // A denied leaky-bucket request waits for nothing: its delay (0) is repeated as given.
    return delay === undefined ? answer : { ...answer, delay };
  }

  /**
   * Remembers `decision` if it is a denial the cache may repeat (see the module's comment); any
   * other answer of the store for the key forgets what was remembered (it may have recorded).
   */
  remember(key: string, policy: CompiledPolicy, cost: number, decision: Decision, callerNow: number | undefined): void {
    const id = entryId(key, policy);
    this.entries.delete(id);
    // A penalty's denial holds until its retry whatever the algorithm (nothing is counted during a block).
    if (decision.reason === 'blocked' && decision.retryAfter > 0) return this.hold(id, policy, cost, decision, callerNow);
    if (decision.allowed || decision.reason !== undefined || policy.countRejected || decision.retryAfter <= 0) return;
    // Where nothing can change before `until`: a fixed window at any cost (it admits again only
    // when it ends, and its remaining is constant until then); any algorithm for one unit when
    // nothing remains (the first unit back is the retry instant).
    if (policy.algorithm !== 'fixed-window' && (cost !== 1 || decision.remaining !== 0)) return;
    this.hold(id, policy, cost, decision, callerNow);
  }

  private hold(id: string, policy: CompiledPolicy, cost: number, decision: Decision, callerNow: number | undefined): void {
    if (this.entries.size >= this.maxKeys) this.entries.delete(this.entries.keys().next().value!);
    const offset = callerNow === undefined ? decision.now - this.clock() : 0;
    this.entries.set(id, { policy, cost, from: decision.now, until: decision.now + decision.retryAfter, decision, offset });
  }

  /** Forgets `key` under `policy` (a reset). */
  forget(key: string, policy: CompiledPolicy): void {
    this.entries.delete(entryId(key, policy));
  }

  clear(): void {
    this.entries.clear();
  }
}

function entryId(key: string, policy: CompiledPolicy): string {
  return `${policy.stateId}\u0000${key}`;
}

/**
 * The cache as the outermost layer: a limit or a peek of one limit (alone, or a group of one) is
 * answered from a denial still in force, else decided below and its answer remembered. Looks and
 * probes pass (they spend nothing and are never answered from a denial). A committed group of
 * several limits may record under each of its keys: what was remembered of them is forgotten.
 */
export class OverLimitLayer extends PassThroughLayer {
  readonly name = 'over-limit-cache';

  constructor(
    below: DecisionLayer,
    readonly cache: OverLimitCache,
  ) {
    super(below);
  }

  override one(key: string, policy: CompiledPolicy, cost: number, now: number | undefined, mode: DecideMode, options: LimitOptions | undefined): MaybePromise<Decision> {
    if (mode !== 'limit' && mode !== 'peek') return this.below.one(key, policy, cost, now, mode, options);
    const cache = this.cache;
    const cached = cache.lookup(key, policy, cost, now);
    if (cached !== undefined) return cached;
    const decided = this.below.one(key, policy, cost, now, mode, options);
    if (decided instanceof Promise) return rememberLater(decided, cache, key, policy, cost, now);
    cache.remember(key, policy, cost, decided, now);
    return decided;
  }

  override all(requests: readonly GroupRequest[], now: number | undefined, mode: DecideMode, commit: boolean, options: LimitAllOptions | undefined): MaybePromise<Decision[]> {
    // A group of one is answered like a single limit, unless the request's other limits were left
    // out for being 0 (a limit that does not commit): the request is denied whatever this one says.
    const single = requests.length === 1 && ((mode === 'limit' && commit) || mode === 'peek') ? requests[0]! : undefined;
    if (single === undefined) {
      if (commit) for (const request of requests) this.cache.forget(request.key, request.policy);
      return this.below.all(requests, now, mode, commit, options);
    }
    const cached = this.cache.lookup(single.key, single.policy, single.cost, now);
    if (cached !== undefined) return [cached];
    const decided = this.below.all(requests, now, mode, commit, options);
    if (decided instanceof Promise) return rememberLater(decided, this.cache, single.key, single.policy, single.cost, now);
    this.cache.remember(single.key, single.policy, single.cost, decided[0]!, now);
    return decided;
  }

  /** A settle may refund: a denial remembered for the key may no longer hold. */
  override settle(key: string, policy: CompiledPolicy, request: SettleRequest, now: number | undefined, options: LimitOptions | undefined): MaybePromise<Settlement> {
    this.cache.forget(key, policy);
    return this.below.settle(key, policy, request, now, options);
  }

  protected override forget(key: string, policy: CompiledPolicy): void {
    this.cache.forget(key, policy);
  }

  protected override clear(): void {
    this.cache.clear();
  }
}

/**
 * Remembers the (first) decision once `decided` settles. Apart from the layer's methods, so that a
 * synchronous answer (the memory store) makes no closure or context for it (issue 32).
 */
function rememberLater<T extends Decision | Decision[]>(decided: Promise<T>, cache: OverLimitCache, key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Promise<T> {
  return decided.then((answer) => {
    cache.remember(key, policy, cost, Array.isArray(answer) ? answer[0]! : (answer as Decision), now);
    return answer;
  });
}
