/**
 * The engine, and the only door to a store: validates what callers pass, compiles policies once,
 * and asks the store. `limit(key, policy, { cost, now })` decides and records, `peek` decides
 * without recording, `limitAll` decides several limits of one request together, `reset` forgets a
 * key. Every adapter (middleware, decision service, express-rate-limit store) and every feature
 * that touches decisions goes through here; rules checking (`check`) sits on top, in
 * rules/limiter.ts.
 */
import { limitZero } from '../algorithms/outcome.js';
import { currentTime } from '../clock.js';
import type { Decision } from '../decision.js';
import { InvalidKeyError, InvalidOptionError, describeValue } from '../errors.js';
import { LeaseBook, leasable } from './leases.js';
import { LocalFirstBook, type LocalFirstStats, type WindowAdd } from './local-first.js';
import { countsInWindows, describeState } from '../algorithms/window-add.js';
import { OverLimitCache, type OverLimitCacheStats } from './over-limit.js';
import {
  checkFailureMode,
  failClosedDecision,
  failOpenDecision,
  localPolicy,
  locally,
  type FailureMode,
  type LimiterFailureMode,
} from './failure-modes.js';
import { StoreGuard, isOutage, unanswered, type StoreHealthSnapshot, type TransitionListener } from './store-guard.js';
import { wellFormedKey } from '../keys.js';
import {
  checkCallOptions,
  checkCost,
  checkKey,
  checkLease,
  checkNow,
  checkSyncInterval,
  type DecideMode,
  type LimitAllOptions,
  type LimitOptions,
  type LimitRequest,
} from './checks.js';
import { PolicyCache, type CompiledPolicy, type Policy } from '../policy.js';
import { limiterCoreOptions, type CoreSettings, type LimiterCoreOptions } from './settings.js';
import { tracedDecide, tracedDecideAll, type TracedStore } from './tracing.js';
import { MemoryStore, memoryStore } from '../store/memory.js';
import type { MaybePromise, Store, StoreRequest, WindowCounts } from '../store/types.js';
import { activeTracer } from '../tracing.js';
import type { Tracer } from '@opentelemetry/api';

export type { FailureMode, LimiterFailureMode } from './failure-modes.js';
export type { BreakerOptions, BreakerState, BreakerTransition } from './breaker.js';
export type { StoreHealthSnapshot } from './store-guard.js';
export type { OverLimitCacheOptions, OverLimitCacheStats } from './over-limit.js';
export type { LocalFirstStats } from './local-first.js';
export { limiterCoreOptions, type CoreSettings, type LimiterCoreOptions } from './settings.js';

export { MAX_KEY_BYTES } from '../keys.js';
export type { DecideMode, LimitAllOptions, LimitOptions, LimitRequest } from './checks.js';

/** Most limits in one {@link LimiterCore.limitAll} call. */
export const MAX_LIMITS_PER_CHECK = 64;

/** The limiter's decisions; `Limiter` (rules/limiter.ts) adds `check`. */
export interface LimiterCore {
  /** Decides one request and records it if admitted. Never rejects to mean "denied". */
  limit(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions): Promise<Decision>;
  /**
   * `limit` without a promise: the decision itself, for callers that want no `await` per request.
   * On the memory store only, which decides in-process; on a store that answers over the network
   * (Redis) it throws {@link InvalidOptionError} before deciding anything (use `limit` there). Bad
   * input throws the typed error `limit` rejects with. `syncIntervalMs` (local-first, which waits
   * for a sync) is refused; a `lease` is taken as by `limit`.
   */
  limitSync(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions): Decision;
  /** What `limit` would answer for the same arguments, recording nothing. */
  peek(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions): Promise<Decision>;
  /**
   * The quota as it stands, spending nothing and never refused (`allowed: true`; `remaining` is
   * what is left now). A limit of 0 still answers `limit-zero`.
   */
  look(key: string, policy: Policy | CompiledPolicy, options?: LimitAllOptions): Promise<Decision>;
  /**
   * Decides several limits of one request together (say per IP and per user), all-or-nothing: the
   * request is admitted when every decision is, and if any denies, no limit records anything (a
   * denied attempt with `countRejected` is still counted) and the admitted limits report what
   * actually remains. One store round trip.
   */
  limitAll(requests: readonly LimitRequest[], options?: LimitAllOptions): Promise<Decision[]>;
  /**
   * `limit` (or `peek`, `look`) for adapters on a hot path: the decision itself when the store
   * answers synchronously (the memory store), a promise otherwise. Bad input throws synchronously.
   */
  decide(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions, mode?: DecideMode): MaybePromise<Decision>;
  /** `limitAll` (or a peek or look of every limit) answered like {@link decide}. */
  decideAll(requests: readonly LimitRequest[], options?: LimitAllOptions, mode?: DecideMode): MaybePromise<Decision[]>;
  /** Forgets `key`'s state under `policy` (its algorithm and window). */
  reset(key: string, policy: Policy | CompiledPolicy): Promise<void>;
  /**
   * Forgets the state of every key starting with `prefix` (non-empty), under every policy; resolves
   * to how many states were removed. On Redis a SCAN of the keyspace: for administration (an
   * express-rate-limit `resetAll`), not for each request.
   */
  resetPrefix(prefix: string): Promise<number>;
  /** The store's health as decisions found it: breaker state, last success and failure, fallbacks. */
  health(): StoreHealthSnapshot;
  /** Hears each change of the breaker's state (logs, metrics); returns a function that stops it. */
  onTransition(listener: TransitionListener): () => void;
  /** The over-limit cache's counters, when it is on. */
  overLimitCacheStats(): OverLimitCacheStats | undefined;
  /** Local-first decisions and syncs, once local-first was used. */
  localFirstStats(): LocalFirstStats | undefined;
  /** The store decisions go to. */
  readonly store: Store;
  /** Closes the store. */
  close(): Promise<void>;
}

/** Creates a limiter without rules on `store` (the embedded memory store by default). */
export function createLimiterCore(options: LimiterCoreOptions = {}): LimiterCore {
  return new CoreLimiter(limiterCoreOptions(options));
}

export class CoreLimiter implements LimiterCore {
  readonly store: Store;
  private readonly policies = new PolicyCache();
  private readonly clock: (() => number) | undefined;
  /** Absent for the memory store: it answers in-process and cannot fail. */
  private readonly guard: StoreGuard | undefined;
  private readonly traced: TracedStore;
  private readonly failureMode: LimiterFailureMode;
  private readonly deadlineMs: number;
  private readonly expectedNodes: number;
  /** The in-process limiter of the `local` failure mode, made on first use. */
  private local: MemoryStore | undefined;
  private readonly localPolicies = new WeakMap<CompiledPolicy, CompiledPolicy>();
  private readonly cache: OverLimitCache | undefined;
  private leases: LeaseBook | undefined;
  private localFirst: LocalFirstBook | undefined;

  constructor(settings: CoreSettings) {
    this.store = settings.store;
    this.clock = settings.clock;
    this.failureMode = settings.failureMode;
    this.deadlineMs = settings.deadlineMs;
    this.expectedNodes = settings.expectedNodes;
    const guarded = !(settings.store instanceof MemoryStore);
    this.guard = guarded ? new StoreGuard({ breaker: settings.breaker, maxInFlight: settings.maxInFlight, clock: settings.clock ?? currentTime, storeKind: settings.store.name }) : undefined;
    this.traced = { kind: settings.store.name, spans: guarded };
    this.cache = settings.overLimitCache === false ? undefined : new OverLimitCache(settings.overLimitCache, settings.clock ?? currentTime);
  }

  overLimitCacheStats(): OverLimitCacheStats | undefined {
    return this.cache?.stats();
  }

  limit(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions): Promise<Decision> {
    // settle() inlined: no closure per call on the hot path.
    try {
      const decided = this.decide(key, policy, options, 'limit');
      return decided instanceof Promise ? decided : Promise.resolve(decided);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  limitSync(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions): Decision {
    if (this.guard !== undefined) {
      throw new InvalidOptionError(`limitSync decides on the memory store only; the ${this.store.name} store answers asynchronously: use await limiter.limit(key, policy, options)`);
    }
    if (options?.syncIntervalMs !== undefined) {
      throw new InvalidOptionError('limitSync does not take syncIntervalMs: local-first waits for a sync with the store, and the memory store decides in-process anyway (drop the option)');
    }
    // Without a guard the store is the memory store: every path of decide answers synchronously.
    return this.decide(key, policy, options, 'limit') as Decision;
  }

  peek(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions): Promise<Decision> {
    return settle(() => this.decide(key, policy, options, 'peek'));
  }

  look(key: string, policy: Policy | CompiledPolicy, options?: LimitAllOptions): Promise<Decision> {
    return settle(() => this.decide(key, policy, options, 'look'));
  }

  limitAll(requests: readonly LimitRequest[], options?: LimitAllOptions): Promise<Decision[]> {
    return settle(() => this.decideAll(requests, options, 'limit'));
  }

  reset(key: string, policy: Policy | CompiledPolicy): Promise<void> {
    return settle(() => {
      key = checkKey(key);
      const compiled = this.policies.get(policy);
      this.cache?.forget(key, compiled);
      this.leases?.forget(key, compiled);
      this.localFirst?.forget(key, compiled);
      return this.store.reset(key, compiled);
    });
  }

  resetPrefix(prefix: string): Promise<number> {
    return settle(() => {
      if (typeof prefix !== 'string' || prefix.length === 0) {
        throw new InvalidKeyError(`resetPrefix needs a non-empty key prefix (an empty one would forget every key), got ${describeValue(prefix)}`);
      }
      this.cache?.clear();
      this.leases?.clear();
      this.localFirst?.clear();
      return this.store.resetPrefix(wellFormedKey(prefix));
    });
  }

  health(): StoreHealthSnapshot {
    return this.guard?.health() ?? { breaker: 'closed', lastHealthyAt: undefined, lastFailureAt: undefined, lastError: undefined, inFlight: 0, fallbacks: { timeout: 0, error: 0, 'breaker-open': 0, overload: 0 } };
  }

  onTransition(listener: TransitionListener): () => void {
    return this.guard?.onTransition(listener) ?? (() => undefined);
  }

  async close(): Promise<void> {
    // A local-first node's unsent units reach the store before it closes.
    this.localFirst?.close();
    await this.localFirst?.flush();
    await Promise.all([this.store.close(), this.local?.close()]);
  }

  decideAll(requests: readonly LimitRequest[], options?: LimitAllOptions, mode: DecideMode = 'limit'): MaybePromise<Decision[]> {
    const tracer = activeTracer();
    return tracer === undefined ? this.decideAllUntraced(requests, options, mode) : this.decideAllTraced(tracer, requests, options, mode);
  }

  /** Apart from `decideAll`, so an untraced call captures nothing for closures. */
  private decideAllTraced(tracer: Tracer, requests: readonly LimitRequest[], options: LimitAllOptions | undefined, mode: DecideMode): MaybePromise<Decision[]> {
    return tracedDecideAll(tracer, this.traced, mode, requests, () => this.decideAllUntraced(requests, options, mode), (policy) => this.policies.get(policy));
  }

  private decideAllUntraced(requests: readonly LimitRequest[], options: LimitAllOptions | undefined, mode: DecideMode): MaybePromise<Decision[]> {
    if (!Array.isArray(requests) || requests.length > MAX_LIMITS_PER_CHECK) {
      throw new InvalidOptionError(`limitAll takes an array of at most ${MAX_LIMITS_PER_CHECK} { key, policy, cost?, failureMode? }, got ${describeValue(requests)}${Array.isArray(requests) ? ` of ${requests.length}` : ''}`);
    }
    if (options !== undefined) checkCallOptions(options);
    const now = this.callTime(options);
    const prepared = requests.map((request) => this.prepare(request, mode));
    if (prepared.length === 0) return [];
    // A call of one limit with a lease or local-first (a rule's lease_size, sync_interval_ms) is decided like a single decision.
    const only = prepared.length === 1 ? requests[0]! : undefined;
    if (only?.syncIntervalMs !== undefined && mode === 'limit' && prepared[0]!.policy.limit !== 0) {
      const { key, policy, cost } = prepared[0]!;
      const decided = this.decideLocalFirst(key, policy, cost, now, only.syncIntervalMs, { ...options, cost });
      return decided instanceof Promise ? decided.then((decision) => [decision]) : [decided];
    }
    if (only?.lease !== undefined && mode === 'limit' && prepared[0]!.policy.limit !== 0 && leasable(prepared[0]!.policy)) {
      const { key, policy, cost } = prepared[0]!;
      const decided = this.decideLeased(key, policy, cost, now, { ...options, cost, lease: only.lease });
      return decided instanceof Promise ? decided.then((decision) => [decision]) : [decided];
    }
    // A limit of 0 denies the whole request: the others are only looked at, never recorded.
    const zero = prepared.some((request) => request.policy.limit === 0);
    const decidable = zero ? prepared.filter((request) => request.policy.limit !== 0) : prepared;
    const commit = mode === 'limit' && !zero;
    // A check of one limit (most envoy checks) is answered by the over-limit cache like a single decision.
    const single = this.cache !== undefined && !zero && decidable.length === 1 && (mode === 'limit' || mode === 'peek') ? decidable[0]! : undefined;
    const cached = single === undefined ? undefined : this.cache!.lookup(single.key, single.policy, single.cost, now);
    if (cached !== undefined) return [cached];
    let decided: MaybePromise<Decision[]>;
    if (decidable.length === 0) decided = [];
    else if (this.guard === undefined) decided = this.store.consumeAll(decidable, now, commit);
    else {
      decided = this.guard.run(
        () => this.store.consumeAll(decidable, now, commit),
        this.callDeadline(options),
        (cause, error) => {
          // Each limit's failure mode, worked out only when the store could not answer.
          const modes = prepared.flatMap((request, i) => (request.policy.limit === 0 ? [] : [requests[i]!.failureMode ?? options?.failureMode ?? this.failureMode]));
          return modes.includes('throw') ? unanswered(cause, error) : this.fallbackAll(decidable, modes as FailureMode[], now, commit);
        },
        'consume_all',
        decidable.length,
      );
    }
    // A group that may record changes its keys' state: what the cache remembered of them is stale.
    if (this.cache !== undefined && single === undefined && commit) for (const request of decidable) this.cache.forget(request.key, request.policy);
    const finish = (decisions: Decision[]): Decision[] => {
      if (single !== undefined) this.cache!.remember(single.key, single.policy, single.cost, decisions[0]!, now);
      const list = mode === 'look' ? decisions.map(unspent) : decisions;
      if (!zero) return list;
      const time = list[0]?.now ?? now ?? currentTime();
      let next = 0;
      return prepared.map((request) => (request.policy.limit === 0 ? limitZero(request.policy, time) : list[next++]!));
    };
    return decided instanceof Promise ? decided.then(finish) : finish(decided);
  }

  /** Decides one request; not async, so a memory-store decision settles without a microtask hop. */
  decide(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions, mode: DecideMode = 'limit'): MaybePromise<Decision> {
    const tracer = activeTracer();
    // Off (no SDK): the decision alone, no span, no closure, no captured context.
    return tracer === undefined ? this.decideUntraced(key, policy, options, mode) : this.decideTraced(tracer, key, policy, options, mode);
  }

  private decideTraced(tracer: Tracer, key: string, policy: Policy | CompiledPolicy, options: LimitOptions | undefined, mode: DecideMode): MaybePromise<Decision> {
    return tracedDecide(tracer, this.traced, mode, () => this.decideUntraced(key, policy, options, mode), () => this.policies.get(policy), options?.cost);
  }

  private decideUntraced(key: string, policy: Policy | CompiledPolicy, options: LimitOptions | undefined, mode: DecideMode): MaybePromise<Decision> {
    key = checkKey(key);
    const compiled = this.policies.get(policy);
    let cost = 1;
    if (options !== undefined) {
      checkCallOptions(options);
      if (options.cost !== undefined) cost = checkCost(options.cost);
    }
    const now = this.callTime(options);
    if (compiled.limit === 0) return limitZero(compiled, now ?? currentTime());
    if (options?.lease !== undefined && mode === 'limit' && leasable(compiled)) return this.decideLeased(key, compiled, cost, now, options);
    if (options?.syncIntervalMs !== undefined && mode === 'limit') return this.decideLocalFirst(key, compiled, cost, now, options.syncIntervalMs, options);
    return this.decideCached(key, compiled, cost, now, mode, options);
  }

  /** Through the over-limit cache when it is on (limit and peek), else the store. */
  private decideCached(key: string, compiled: CompiledPolicy, cost: number, now: number | undefined, mode: DecideMode, options: LimitOptions | undefined): MaybePromise<Decision> {
    const cache = this.cache;
    if (cache === undefined || (mode !== 'limit' && mode !== 'peek')) return this.decideGuarded(key, compiled, cost, now, mode, options);
    const cached = cache.lookup(key, compiled, cost, now);
    if (cached !== undefined) return cached;
    const decided = this.decideGuarded(key, compiled, cost, now, mode, options);
    const remember = (decision: Decision): Decision => {
      cache.remember(key, compiled, cost, decision, now);
      return decision;
    };
    return decided instanceof Promise ? decided.then(remember) : remember(decided);
  }

  /**
   * A decision under a token lease: from the key's lease when it holds enough permits, else by
   * taking a new lease of `lease` units (this request's cost included) from the store; when the
   * store has less than a whole lease left, this request alone is decided, as without a lease.
   */
  private decideLeased(key: string, compiled: CompiledPolicy, cost: number, now: number | undefined, options: LimitOptions): MaybePromise<Decision> {
    const book = (this.leases ??= new LeaseBook(this.clock ?? currentTime));
    const spent = book.spend(key, compiled, cost, now);
    if (spent !== undefined) return spent;
    const take = Math.max(options.lease!, cost);
    const alone = (): MaybePromise<Decision> => this.decideCached(key, compiled, cost, now, 'limit', options);
    // A key with less than a lease left, or that the over-limit cache knows is denied, is decided alone.
    if (book.isShort(key, compiled, now) || this.cache?.lookup(key, compiled, cost, now) !== undefined) return alone();
    const leased = this.decideGuarded(key, compiled, take, now, 'limit', options);
    const settle = (decision: Decision): MaybePromise<Decision> => {
      // A failure mode's answer is no lease: it is returned as it is.
      if (decision.allowed) return decision.reason === undefined ? book.record(key, compiled, take, cost, decision, now) : decision;
      if (take === cost || decision.reason !== undefined) return decision;
      book.refused(key, compiled, decision, now);
      return alone();
    };
    return leased instanceof Promise ? leased.then(settle) : settle(leased);
  }

  /**
   * A local-first decision: on this node's fresh view of the key's counter, else by the store
   * (exactly, through the failure modes) while a sync fetches a view in the same store call.
   */
  private decideLocalFirst(key: string, compiled: CompiledPolicy, cost: number, now: number | undefined, syncMs: number, options: LimitOptions): MaybePromise<Decision> {
    if (!countsInWindows(compiled)) {
      throw new InvalidOptionError(`syncIntervalMs (local-first) needs a fixed-window or sliding-window policy of precision 1, whose counts add up across nodes; for ${describeState(compiled)} use a lease instead`);
    }
    const store = this.store;
    if (store.addToWindow === undefined) throw new InvalidOptionError(`syncIntervalMs (local-first) needs a store that can sync window counts; the ${store.name} store cannot`);
    const book = (this.localFirst ??= new LocalFirstBook(this.clock ?? currentTime, (adds) => {
      // A tick's syncs are one guarded store call: they take one place among the calls in flight.
      const run = (): MaybePromise<(WindowCounts | Error)[]> => syncWindows(store, adds);
      return this.guard === undefined ? run() : this.guard.run(run, this.deadlineMs, unanswered, 'sync', adds.length);
    }));
    const local = book.decide(key, compiled, cost, now, syncMs);
    if (local !== undefined) return local;
    const decided = this.decideGuarded(key, compiled, cost, now, 'limit', options);
    const synced = book.adopt(key, compiled, now, syncMs);
    // Answered once the sync sent with it is (the same store call): the next request finds the view.
    return synced instanceof Promise ? synced.then(() => decided) : decided;
  }

  /** Local-first decisions and syncs, when local-first was used. */
  localFirstStats(): LocalFirstStats | undefined {
    return this.localFirst?.stats();
  }

  /** Permits spent from leases and leases taken, when leases were used. */
  leaseStats(): { readonly spent: number; readonly taken: number; readonly leases: number } | undefined {
    return this.leases?.stats();
  }

  /** One decision by the store, through the guard when there is one. */
  private decideGuarded(key: string, compiled: CompiledPolicy, cost: number, now: number | undefined, mode: DecideMode, options: LimitOptions | undefined): MaybePromise<Decision> {
    if (this.guard === undefined) return this.decideOn(this.store, key, compiled, cost, now, mode);
    const failureMode = options?.failureMode ?? this.failureMode;
    return this.guard.run(
      () => this.decideOn(this.store, key, compiled, cost, now, mode),
      this.callDeadline(options),
      (cause, error) => (failureMode === 'throw' ? unanswered(cause, error) : this.fallbackOne(key, compiled, cost, now, mode, failureMode)),
      mode === 'limit' ? 'consume' : 'peek',
    );
  }

  private decideOn(store: Store, key: string, policy: CompiledPolicy, cost: number, now: number | undefined, mode: DecideMode): MaybePromise<Decision> {
    if (mode === 'limit') return store.consume(key, policy, cost, now);
    if (mode === 'peek') return store.peek(key, policy, cost, now);
    if (mode === 'probe') return store.peek(key, policy, 0, now);
    // A look is a peek of cost 0: the quota as it stands.
    const looked = store.peek(key, policy, 0, now);
    return looked instanceof Promise ? looked.then(unspent) : unspent(looked);
  }

  /** The decision of `failureMode` when the store could not make it. */
  private fallbackOne(key: string, policy: CompiledPolicy, cost: number, now: number | undefined, mode: DecideMode, failureMode: FailureMode): Decision {
    const at = now ?? currentTime();
    if (failureMode === 'open') return failOpenDecision(policy, mode === 'limit' || mode === 'peek' ? cost : 0, at);
    if (failureMode === 'closed') return mode === 'look' ? unspent(failClosedDecision(policy, at)) : failClosedDecision(policy, at);
    return locally(this.decideOn(this.localStore(), key, this.localPolicy(policy), cost, at, mode) as Decision);
  }

  /**
   * The decisions of each limit's failure mode when the store could not decide them together.
   * Still all-or-nothing: the local limits record only when no limit denies for sure (`closed`).
   */
  private fallbackAll(requests: readonly StoreRequest[], modes: readonly FailureMode[], now: number | undefined, commit: boolean): Decision[] {
    const at = now ?? currentTime();
    const local = requests.filter((_, i) => modes[i] === 'local').map((request) => ({ ...request, policy: this.localPolicy(request.policy) }));
    const localDecisions = local.length === 0 ? [] : (this.localStore().consumeAll(local, at, commit && !modes.includes('closed')) as Decision[]);
    let next = 0;
    return requests.map((request, i) => {
      if (modes[i] === 'open') return failOpenDecision(request.policy, request.cost, at);
      if (modes[i] === 'closed') return failClosedDecision(request.policy, at);
      return locally(localDecisions[next++]!);
    });
  }

  private localStore(): MemoryStore {
    return (this.local ??= memoryStore());
  }

  private localPolicy(policy: CompiledPolicy): CompiledPolicy {
    let scaled = this.localPolicies.get(policy);
    if (scaled === undefined) this.localPolicies.set(policy, (scaled = localPolicy(policy, this.expectedNodes)));
    return scaled;
  }

  private callDeadline(options: LimitAllOptions | undefined): number {
    return options?.deadlineMs === undefined ? this.deadlineMs : options.deadlineMs;
  }

  /** The call's `now`, else the limiter's clock, else undefined (the store's own time). */
  private callTime(options: LimitAllOptions | undefined): number | undefined {
    if (options !== undefined && options.now !== undefined) return checkNow(options.now);
    return this.clock === undefined ? undefined : checkNow(this.clock());
  }

  private prepare(request: LimitRequest, mode: DecideMode): StoreRequest {
    if (typeof request !== 'object' || request === null) {
      throw new InvalidOptionError(`limitAll: each request must be { key, policy, cost?, failureMode? }, got ${describeValue(request)}`);
    }
    if (request.failureMode !== undefined) checkFailureMode(request.failureMode, 'limitAll: failureMode');
    if (request.lease !== undefined) checkLease(request.lease, 'limitAll: lease');
    if (request.syncIntervalMs !== undefined) checkSyncInterval(request.syncIntervalMs, 'limitAll: syncIntervalMs');
    const key = checkKey(request.key);
    const policy = this.policies.get(request.policy);
    const cost = request.cost === undefined ? 1 : checkCost(request.cost);
    return { key, policy, cost: mode === 'look' || mode === 'probe' ? 0 : cost };
  }
}

/**
 * Local-first syncs on `store`: each key's counts, or the error that key alone met (its state is
 * another type or unreadable); an outage fails them all, so the guard sees it.
 */
function syncWindows(store: Store, adds: readonly WindowAdd[]): MaybePromise<(WindowCounts | Error)[]> {
  const answers = adds.map((add) => store.addToWindow!(add.key, add.policy, add.units, add.now));
  if (!answers.some((answer) => answer instanceof Promise)) return answers as WindowCounts[];
  return Promise.all(answers.map((answer) => Promise.resolve(answer).catch((error: unknown) => (isOutage(error) ? Promise.reject(error) : (error as Error)))));
}

/** Runs `decide` and always answers with a promise: thrown input errors become rejections. */
function settle<T>(decide: () => MaybePromise<T>): Promise<T> {
  try {
    const result = decide();
    return result instanceof Promise ? result : Promise.resolve(result);
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * A look spends nothing and is never refused: a peek of cost 0 is denied only when more than the
 * capacity is already logged (a sliding log with `countRejected`), which a look reports as allowed
 * with nothing remaining.
 */
function unspent(decision: Decision): Decision {
  if (decision.allowed) return decision;
  const { limit, remaining, resetAt, now, delay } = decision;
  return delay === undefined
    ? { allowed: true, limit, remaining, resetAt, retryAfter: 0, now }
    : { allowed: true, limit, remaining, resetAt, retryAfter: 0, now, delay };
}
