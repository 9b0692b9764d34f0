/**
 * The engine's core, and what every entry point shares: input checked once per call, policies
 * compiled once (cached), the call's time, a limit of 0, and tracing around the decision. The
 * decision itself goes down the stack of layers (layer.ts: over-limit cache → lease / local-first
 * → guard → store) in one order for `decide` and `decideAll`, whatever the mode. Every adapter
 * (middleware, decision service, express-rate-limit store) and every feature that touches
 * decisions goes through here; rules checking (`check`) sits on top, in rules/create-limiter.ts.
 */
import { limitZero } from '../algorithms/outcome.js';
import { currentTime } from '../clock.js';
import type { Decision } from '../decision.js';
import { InvalidKeyError, InvalidOptionError, describeValue } from '../errors.js';
import { wellFormedKey } from '../keys.js';
import { PolicyCache, type CompiledPolicy, type Policy } from '../policy.js';
import { MemoryStore } from '../store/memory.js';
import type { MaybePromise, Store } from '../store/types.js';
import { activeTracer } from '../tracing.js';
import { checkCallOptions, checkCost, checkKey, checkLeasable, checkLocalModes, checkNow, type DecideMode, type LimitAllOptions, type LimitOptions, type LimitRequest } from './checks.js';
import { ConcurrencySlots, type AcquireOptions, type HeldOptions, type Permit, type ReleaseOptions } from './concurrency.js';
import { checkFailureMode } from './failure-modes.js';
import { GuardLayer } from './guard-layer.js';
import { PassThroughLayer, unspent, type DecisionLayer, type GroupRequest, type LayerName } from './layer.js';
import { LeaseLayer } from './leases.js';
import { LocalFirstLayer, type LocalFirstStats } from './local-first.js';
import { NodeCount } from './node-count.js';
import { OverLimitCache, OverLimitLayer, type OverLimitCacheStats } from './over-limit.js';
import { limiterCoreOptions, type CoreSettings, type LimiterCoreOptions } from './settings.js';
import type { StoreHealthSnapshot, TransitionListener } from './store-guard.js';
import { StoreLayer } from './store-layer.js';
import { tracedDecide, tracedDecideAll, type TracedStore } from './spans.js';
import { checkReservable, checkReserveOptions, checkSettleOptions, type ReserveOptions, type SettleOptions } from './reservations.js';
import type { ReservedDecision, Settlement } from '../store/types.js';
import { checkUsageOptions, usageOf, type Usage, type UsageOptions } from './usage.js';
import { LedgerRecorder, type LimiterLedger } from './ledger.js';
import type { Tracer } from '@opentelemetry/api';

export { MAX_KEY_BYTES } from '../keys.js';

/** Most limits in one {@link LimiterCore.limitAll} call. */
export const MAX_LIMITS_PER_CHECK = 64;

/** The limiter's decisions; `Limiter` (rules/create-limiter.ts) adds `check`. */
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
   * How much of `key`'s quota under `policy` is used, and over which period (a look: nothing is
   * spent; docs/semantics.md, Usage). Rejects with StoreUnavailableError when the store cannot answer.
   */
  usage(key: string, policy: Policy | CompiledPolicy, options?: UsageOptions): Promise<Usage>;
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
  /**
   * Reserve then settle (docs/semantics.md): debits the estimate `cost` as `limit` would and books
   * it under `id` for `ttl` ms; a retry with the same id answers the first decision and counts
   * once (with `settled`, the settled cost, once it is settled). A refused reservation debits and
   * books nothing.
   */
  reserve(key: string, policy: Policy | CompiledPolicy, options: ReserveOptions): Promise<ReservedDecision>;
  /**
   * Settles reservation `id` with the actual `cost`: refunds or charges the difference (what a
   * refund means per algorithm: docs/semantics.md), once; a repeat, or an id with no open
   * reservation, changes nothing. Rejects when the store cannot answer: retrying is safe.
   */
  settle(key: string, policy: Policy | CompiledPolicy, options: SettleOptions): Promise<Settlement>;
  /**
   * Takes one of `limit` concurrency slots of `key` (concurrency.ts): granted while fewer are held,
   * across every process sharing the store; held until released or `ttl` passes. Never rejects to
   * mean "refused".
   */
  acquire(key: string, options: AcquireOptions): Promise<Permit>;
  /** Frees a permit's slot from any process; true if it held one, false if not (idempotent). */
  release(key: string, id: string, options?: ReleaseOptions): Promise<boolean>;
  /**
   * How many slots of each key are held now, across every process sharing the store (expired
   * slots do not count), in order; takes none. At most 1,000 keys a call (concurrency.ts MAX_HELD_KEYS). A look,
   * not a decision: when the store cannot answer it rejects with the store's error, whatever the
   * failure mode.
   */
  heldSlots(keys: readonly string[], options?: HeldOptions): Promise<number[]>;
  /** The usage ledger of policies with a `ledger` (limiter/ledger.ts): its export and its counters. */
  readonly ledger: LimiterLedger;
  /** The store decisions go to. */
  readonly store: Store;
  /** Closes the store. */
  close(): Promise<void>;
}

/** Creates a limiter without rules on `store` (the embedded memory store by default). */
export function createLimiterCore(options: LimiterCoreOptions = {}): LimiterCore {
  return new CoreLimiter(limiterCoreOptions(options));
}

/** The layers a limiter was built with, each kept to read its state (stats, health). */
interface Stack {
  readonly top: DecisionLayer;
  /**
   * Where a single call with neither `lease` nor `syncIntervalMs` enters: the same stack without the
   * lease and local-first layers, which pass such a call down untouched (two calls fewer per decision).
   */
  readonly plain: DecisionLayer;
  readonly overLimit: OverLimitLayer | undefined;
  readonly lease: LeaseLayer;
  readonly localFirst: LocalFirstLayer;
  readonly guard: GuardLayer | undefined;
  /** The bottom layer: the one door to the store (concurrency slots go through it too). */
  readonly storeLayer: StoreLayer;
}

/**
 * The stack of layers, bottom up, in the one order of layer.ts. The guard is left out for the
 * memory store (it answers in-process and cannot fail), the over-limit cache when it is off.
 */
function buildStack(settings: CoreSettings): Stack {
  const { store } = settings;
  const clock = settings.clock ?? currentTime;
  const storeLayer = new StoreLayer(store);
  let top: DecisionLayer = storeLayer;
  const guard = store instanceof MemoryStore ? undefined : new GuardLayer(top, { ...settings, clock, storeKind: store.name, nodes: nodeCount(storeLayer, settings) });
  if (guard !== undefined) top = guard;
  const localFirst = new LocalFirstLayer(top, clock, { name: store.name, syncs: store.addToWindow !== undefined });
  const lease = new LeaseLayer(localFirst, clock);
  top = lease;
  const overLimit = settings.overLimitCache === false ? undefined : new OverLimitLayer(top, new OverLimitCache(settings.overLimitCache, clock));
  if (overLimit !== undefined) top = overLimit;
  // The over-limit cache of `plain` is the stack's own cache (one book of denials, one reset hook).
  const below = guard ?? storeLayer;
  const plain = overLimit === undefined ? below : new OverLimitLayer(below, overLimit.cache);
  return { top, plain, overLimit, lease, localFirst, guard, storeLayer };
}

/** Heartbeats counting the nodes that share the store, when it counts them and they are not turned off. */
function nodeCount(storeLayer: StoreLayer, settings: CoreSettings): NodeCount | undefined {
  if (settings.heartbeatMs === false || !storeLayer.countsNodes) return undefined;
  return new NodeCount(storeLayer, settings.heartbeatMs, settings.expectedNodes);
}

export class CoreLimiter implements LimiterCore {
  readonly store: Store;
  private readonly policies = new PolicyCache();
  private readonly clock: (() => number) | undefined;
  private readonly layers: Stack;
  /** The first layer a decision meets. */
  private readonly top: DecisionLayer;
  /** The first layer a single decision without a lease or local-first meets (Stack.plain). */
  private readonly plain: DecisionLayer;
  private readonly traced: TracedStore;
  private readonly slots: ConcurrencySlots;
  private readonly recorder: LedgerRecorder;

  constructor(settings: CoreSettings) {
    this.store = settings.store;
    this.clock = settings.clock;
    this.layers = buildStack(settings);
    this.top = this.layers.top;
    this.plain = this.layers.plain;
    this.traced = { kind: settings.store.name, spans: this.layers.guard !== undefined };
    this.recorder = new LedgerRecorder(this.layers.storeLayer, settings.clock);
    this.slots = new ConcurrencySlots({ ...settings, storeLayer: this.layers.storeLayer, storeName: settings.store.name, guard: this.layers.guard });
  }

  get ledger(): LimiterLedger {
    return this.recorder;
  }

  acquire(key: string, options: AcquireOptions): Promise<Permit> {
    return this.slots.acquire(key, options);
  }

  release(key: string, id: string, options?: ReleaseOptions): Promise<boolean> {
    return this.slots.release(key, id, options);
  }

  heldSlots(keys: readonly string[], options?: HeldOptions): Promise<number[]> {
    return this.slots.held(keys, options);
  }

  overLimitCacheStats(): OverLimitCacheStats | undefined {
    return this.layers.overLimit?.cache.stats();
  }

  /** The layers a decision goes through, outermost first (layer.ts: those that are on, in LAYER_ORDER). */
  layerNames(): readonly LayerName[] {
    const names: LayerName[] = [];
    for (let layer: DecisionLayer | undefined = this.top; layer !== undefined; layer = layer instanceof PassThroughLayer ? layer.next : undefined) names.push(layer.name);
    return names;
  }

  /** Local-first decisions and syncs, when local-first was used. */
  localFirstStats(): LocalFirstStats | undefined {
    return this.layers.localFirst.stats();
  }

  /** Permits spent from leases and leases taken, when leases were used. */
  leaseStats(): { readonly spent: number; readonly taken: number; readonly leases: number } | undefined {
    return this.layers.lease.stats();
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
    if (this.layers.guard !== undefined) {
      throw new InvalidOptionError(`limitSync decides on the memory store only; the ${this.store.name} store answers asynchronously: use await limiter.limit(key, policy, options)`);
    }
    if (options?.syncIntervalMs !== undefined) {
      throw new InvalidOptionError('limitSync does not take syncIntervalMs: local-first waits for a sync with the store, and the memory store decides in-process anyway (drop the option)');
    }
    // Without a guard the store is the memory store: every layer answers synchronously.
    return this.decide(key, policy, options, 'limit') as Decision;
  }

  peek(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions): Promise<Decision> {
    return settle(() => this.decide(key, policy, options, 'peek'));
  }

  look(key: string, policy: Policy | CompiledPolicy, options?: LimitAllOptions): Promise<Decision> {
    return settle(() => this.decide(key, policy, options, 'look'));
  }

  usage(key: string, policy: Policy | CompiledPolicy, options?: UsageOptions): Promise<Usage> {
    return settle(() => {
      const compiled = this.policies.get(policy);
      const now = options === undefined ? undefined : checkUsageOptions(options);
      const looked = this.decide(key, compiled, now === undefined ? undefined : { now }, 'look');
      return looked instanceof Promise ? looked.then((decision) => usageOf(decision, compiled)) : usageOf(looked, compiled);
    });
  }

  limitAll(requests: readonly LimitRequest[], options?: LimitAllOptions): Promise<Decision[]> {
    return settle(() => this.decideAll(requests, options, 'limit'));
  }

  reserve(key: string, policy: Policy | CompiledPolicy, options: ReserveOptions): Promise<ReservedDecision> {
    return settle(() => {
      const { checkedKey, compiled, request, at } = this.reservation(key, policy, 'reserve', checkReserveOptions(options));
      if (compiled.limit === 0) return limitZero(compiled, at ?? currentTime());
      return this.top.reserve(checkedKey, compiled, request, at, options);
    });
  }

  settle(key: string, policy: Policy | CompiledPolicy, options: SettleOptions): Promise<Settlement> {
    return settle(() => {
      const { checkedKey, compiled, request, at } = this.reservation(key, policy, 'settle', checkSettleOptions(options));
      if (compiled.limit === 0) return { status: 'unknown', reserved: 0, cost: 0, decision: limitZero(compiled, at ?? currentTime()) };
      const settled = this.top.settle(checkedKey, compiled, request, at, options);
      return settled instanceof Promise ? settled.then(looked) : looked(settled);
    });
  }

  /** A reserve's or settle's checked key, policy and request, and the call's time (undefined: the store's). */
  private reservation<R>(key: string, policy: Policy | CompiledPolicy, where: 'reserve' | 'settle', checked: { request: R; now: number | undefined }): { checkedKey: string; compiled: CompiledPolicy; request: R; at: number | undefined } {
    const checkedKey = checkKey(key);
    const compiled = this.policies.get(policy);
    checkReservable(compiled, where);
    return { checkedKey, compiled, request: checked.request, at: checked.now ?? this.callTime(undefined) };
  }

  /** Every layer forgets what it holds of the key (its reset hook), then the store forgets it. */
  reset(key: string, policy: Policy | CompiledPolicy): Promise<void> {
    return settle(() => this.top.reset(checkKey(key), this.policies.get(policy)));
  }

  resetPrefix(prefix: string): Promise<number> {
    return settle(() => {
      if (typeof prefix !== 'string' || prefix.length === 0) {
        throw new InvalidKeyError(`resetPrefix needs a non-empty key prefix (an empty one would forget every key), got ${describeValue(prefix)}`);
      }
      return this.top.resetPrefix(wellFormedKey(prefix));
    });
  }

  health(): StoreHealthSnapshot {
    return this.layers.guard?.health() ?? { breaker: 'closed', lastHealthyAt: undefined, lastFailureAt: undefined, lastError: undefined, inFlight: 0, fallbacks: { timeout: 0, error: 0, 'breaker-open': 0, overload: 0 } };
  }

  onTransition(listener: TransitionListener): () => void {
    return this.layers.guard?.guard.onTransition(listener) ?? (() => undefined);
  }

  /** Each layer closes its own work first (local-first pushes its unsent units), the store last. */
  close(): Promise<void> {
    return this.top.close();
  }

  /** Decides one request; not async, so a memory-store decision settles without a microtask hop. */
  decide(key: string, policy: Policy | CompiledPolicy, options?: LimitOptions, mode: DecideMode = 'limit'): MaybePromise<Decision> {
    const tracer = activeTracer();
    // Off (no SDK): the decision alone, no span, no closure, no captured context.
    return tracer === undefined ? this.decideUntraced(key, policy, options, mode) : this.decideTraced(tracer, key, policy, options, mode);
  }

  decideAll(requests: readonly LimitRequest[], options?: LimitAllOptions, mode: DecideMode = 'limit'): MaybePromise<Decision[]> {
    const tracer = activeTracer();
    return tracer === undefined ? this.decideAllUntraced(requests, options, mode) : this.decideAllTraced(tracer, requests, options, mode);
  }

  private decideTraced(tracer: Tracer, key: string, policy: Policy | CompiledPolicy, options: LimitOptions | undefined, mode: DecideMode): MaybePromise<Decision> {
    return tracedDecide(tracer, this.traced, mode, () => this.decideUntraced(key, policy, options, mode), () => this.policies.get(policy), options?.cost);
  }

  /** Apart from `decideAll`, so an untraced call captures nothing for closures. */
  private decideAllTraced(tracer: Tracer, requests: readonly LimitRequest[], options: LimitAllOptions | undefined, mode: DecideMode): MaybePromise<Decision[]> {
    return tracedDecideAll(tracer, this.traced, mode, requests, () => this.decideAllUntraced(requests, options, mode), (policy) => this.policies.get(policy));
  }

  private decideUntraced(key: string, policy: Policy | CompiledPolicy, options: LimitOptions | undefined, mode: DecideMode): MaybePromise<Decision> {
    key = checkKey(key);
    const compiled = this.policies.get(policy);
    let cost = 1;
    if (options !== undefined) {
      checkCallOptions(options);
      if (options.cost !== undefined) cost = checkCost(options.cost);
    }
    if (options?.lease !== undefined) checkLeasable(compiled, 'lease');
    const now = this.callTime(options);
    if (compiled.limit === 0) return limitZero(compiled, now ?? currentTime());
    const entry = options === undefined || (options.lease === undefined && options.syncIntervalMs === undefined) ? this.plain : this.top;
    if (compiled.ledger === undefined || mode !== 'limit') return entry.one(key, compiled, mode === 'look' || mode === 'probe' ? 0 : cost, now, mode, options);
    // A usage ledger: recorded right after the decision (limiter/ledger.ts).
    this.recorder.check();
    return this.recorder.after(entry.one(key, compiled, cost, now, mode, options), key, compiled, cost, options?.requestId);
  }

  private decideAllUntraced(requests: readonly LimitRequest[], options: LimitAllOptions | undefined, mode: DecideMode): MaybePromise<Decision[]> {
    if (!Array.isArray(requests) || requests.length > MAX_LIMITS_PER_CHECK) {
      throw new InvalidOptionError(`limitAll takes an array of at most ${MAX_LIMITS_PER_CHECK} { key, policy, cost?, failureMode? }, got ${describeValue(requests)}${Array.isArray(requests) ? ` of ${requests.length}` : ''}`);
    }
    if (options !== undefined) checkCallOptions(options);
    const now = this.callTime(options);
    // Loops, and the closures apart (finishGroup): the usual call makes no closure or context (issue 32).
    const prepared: GroupRequest[] = [];
    for (const request of requests) prepared.push(this.prepare(request, mode));
    if (prepared.length === 0) return [];
    // A call of one limit with a lease or local-first (a rule's lease_size, sync_interval_ms) is
    // decided as a single decision: those layers decide one limit at a time.
    const only = prepared.length === 1 ? requests[0]! : undefined;
    if (only !== undefined && (only.lease !== undefined || only.syncIntervalMs !== undefined) && mode === 'limit' && prepared[0]!.policy.limit !== 0) {
      const { key, policy, cost } = prepared[0]!;
      let decided = this.top.one(key, policy, cost, now, mode, { ...options, cost, failureMode: prepared[0]!.failureMode ?? options?.failureMode, lease: only.lease, syncIntervalMs: only.syncIntervalMs });
      if (policy.ledger !== undefined) decided = this.recorder.after(decided, key, policy, cost, options?.requestId);
      return decided instanceof Promise ? decided.then(alone) : [decided];
    }
    // A limit of 0 denies the whole request: the others are only looked at, never recorded.
    let zero = false;
    for (const request of prepared) if (request.policy.limit === 0) zero = true;
    const decidable = zero ? prepared.filter(hasLimit) : prepared;
    const ledgered = mode === 'limit' && !zero && decidable.some(hasLedger) && this.recorder.check() !== undefined;
    let decided = decidable.length === 0 ? [] : this.top.all(decidable, now, mode, mode === 'limit' && !zero, options);
    if (ledgered) decided = this.recorder.afterAll(decided, decidable, options?.requestId);
    // The usual call (limits, none of 0) takes the decisions as they are.
    if (mode !== 'look' && !zero) return decided;
    return finishGroup(decided, prepared, mode, zero, now);
  }

  /** The call's `now`, else the limiter's clock, else undefined (the store's own time). */
  private callTime(options: LimitAllOptions | undefined): number | undefined {
    if (options !== undefined && options.now !== undefined) return checkNow(options.now);
    return this.clock === undefined ? undefined : checkNow(this.clock());
  }

  /** One limit of a group, checked as a single call's options are (the same refusals). */
  private prepare(request: LimitRequest, mode: DecideMode): GroupRequest {
    if (typeof request !== 'object' || request === null) {
      throw new InvalidOptionError(`limitAll: each request must be { key, policy, cost?, failureMode? }, got ${describeValue(request)}`);
    }
    if (request.failureMode !== undefined) checkFailureMode(request.failureMode, 'limitAll: failureMode');
    checkLocalModes(request, 'limitAll: ');
    const key = checkKey(request.key);
    const policy = this.policies.get(request.policy);
    if (request.lease !== undefined) checkLeasable(policy, 'limitAll: lease');
    const cost = request.cost === undefined ? 1 : checkCost(request.cost);
    return { key, policy, cost: mode === 'look' || mode === 'probe' ? 0 : cost, failureMode: request.failureMode };
  }
}

const alone = (decision: Decision): Decision[] => [decision];
const hasLimit = (request: GroupRequest): boolean => request.policy.limit !== 0;
const hasLedger = (request: GroupRequest): boolean => request.policy.ledger !== undefined;

/** A group's answer for a look (unspent) or with limits of 0 (each denied, in its place among the others). */
function finishGroup(decided: MaybePromise<Decision[]>, prepared: readonly GroupRequest[], mode: DecideMode, zero: boolean, now: number | undefined): MaybePromise<Decision[]> {
  const finish = (decisions: Decision[]): Decision[] => {
    const list = mode === 'look' ? decisions.map(unspent) : decisions;
    if (!zero) return list;
    const time = list[0]?.now ?? now ?? currentTime();
    let next = 0;
    return prepared.map((request) => (request.policy.limit === 0 ? limitZero(request.policy, time) : list[next++]!));
  };
  return decided instanceof Promise ? decided.then(finish) : finish(decided);
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

/** A settle answers the quota as a look does: spending nothing, never refused (unspent). */
function looked(settlement: Settlement): Settlement {
  return settlement.decision.allowed ? settlement : { ...settlement, decision: unspent(settlement.decision) };
}
