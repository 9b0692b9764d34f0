/**
 * The guard layer: every call to a store that can fail (not the memory store, which answers
 * in-process) runs under the {@link StoreGuard} — a deadline, a bound on calls in flight, the
 * circuit breaker — and what the store could not answer is answered by the call's failure mode
 * (failure-modes.ts): `open`, `closed`, `local` (an in-process memory store enforcing
 * ⌈limit / nodes⌉, the nodes sharing the store as last counted, node-count.ts, at least
 * `expectedNodes`), or `throw`. A group keeps each limit's own mode, all-or-nothing.
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';
import { currentTime } from '../clock.js';
import { memoryStore } from '../store/memory.js';
import type { MaybePromise, ReservedDecision, ReserveRequest, SettleRequest, Settlement } from '../store/types.js';
import type { DecideMode, LimitAllOptions, LimitOptions } from './checks.js';
import { failClosedDecision, failOpenDecision, localPolicy, locally, type FailureMode, type LimiterFailureMode } from './failure-modes.js';
import { PassThroughLayer, unspent, type DecisionLayer, type GroupRequest, type WindowAdd, type WindowSyncAnswer } from './layer.js';
import type { NodeCount } from './node-count.js';
import { StoreGuard, unanswered, type GuardOptions, type StoreHealthSnapshot } from './store-guard.js';
import { StoreLayer } from './store-layer.js';

export interface GuardLayerSettings extends GuardOptions {
  readonly failureMode: LimiterFailureMode;
  readonly deadlineMs: number;
  readonly expectedNodes: number;
  /** The nodes sharing the store as heartbeats count them; undefined: `expectedNodes` alone. */
  readonly nodes: NodeCount | undefined;
}

export class GuardLayer extends PassThroughLayer {
  readonly name = 'guard';
  readonly guard: StoreGuard;
  private readonly failureMode: LimiterFailureMode;
  private readonly deadlineMs: number;
  private readonly expectedNodes: number;
  private readonly nodes: NodeCount | undefined;
  /** The in-process store of the `local` failure mode, made on first use. */
  private local: StoreLayer | undefined;
  /** Each policy's local share, and the node count it was divided by. */
  private readonly localPolicies = new WeakMap<CompiledPolicy, { readonly nodes: number; readonly policy: CompiledPolicy }>();

  constructor(below: DecisionLayer, settings: GuardLayerSettings) {
    super(below);
    this.guard = new StoreGuard(settings);
    this.failureMode = settings.failureMode;
    this.deadlineMs = settings.deadlineMs;
    this.expectedNodes = settings.expectedNodes;
    this.nodes = settings.nodes;
  }

  /** The guard's health, and the nodes last counted sharing the store. */
  health(): StoreHealthSnapshot {
    const liveNodes = this.nodes?.lastSeen();
    return liveNodes === undefined ? this.guard.health() : { ...this.guard.health(), liveNodes };
  }

  override one(key: string, policy: CompiledPolicy, cost: number, now: number | undefined, mode: DecideMode, options: LimitOptions | undefined): MaybePromise<Decision> {
    const failureMode = options?.failureMode ?? this.failureMode;
    return this.guard.run(
      () => this.below.one(key, policy, cost, now, mode, options),
      this.deadline(options),
      (cause, error) => (failureMode === 'throw' ? unanswered(cause, error) : this.fallbackOne(key, policy, cost, now, mode, failureMode)),
      mode === 'limit' ? 'consume' : 'peek',
    );
  }

  override all(requests: readonly GroupRequest[], now: number | undefined, mode: DecideMode, commit: boolean, options: LimitAllOptions | undefined): MaybePromise<Decision[]> {
    return this.guard.run(
      () => this.below.all(requests, now, mode, commit, options),
      this.deadline(options),
      (cause, error) => {
        // Each limit's failure mode, worked out only when the store could not answer.
        const modes = requests.map((request) => request.failureMode ?? options?.failureMode ?? this.failureMode);
        return modes.includes('throw') ? unanswered(cause, error) : this.fallbackAll(requests, modes as FailureMode[], now, commit);
      },
      'consume_all',
      requests.length,
    );
  }

  /** A reserve the store could not decide is answered by the failure mode, as a limit of its estimate (nothing is booked). */
  override reserve(key: string, policy: CompiledPolicy, request: ReserveRequest, now: number | undefined, options: LimitOptions | undefined): MaybePromise<ReservedDecision> {
    const failureMode = options?.failureMode ?? this.failureMode;
    return this.guard.run(
      () => this.below.reserve(key, policy, request, now, options),
      this.deadline(options),
      (cause, error) => (failureMode === 'throw' ? unanswered(cause, error) : this.fallbackOne(key, policy, request.cost, now, 'limit', failureMode)),
    );
  }

  /** A settle has no answer of its own to give without the store: it rejects, and is safe to retry (once per id). */
  override settle(key: string, policy: CompiledPolicy, request: SettleRequest, now: number | undefined, options: LimitOptions | undefined): MaybePromise<Settlement> {
    return this.guard.run(() => this.below.settle(key, policy, request, now, options), this.deadline(options), unanswered);
  }

  /** A tick's syncs are one guarded store call: they take one place among the calls in flight. */
  override sync(adds: readonly WindowAdd[]): MaybePromise<WindowSyncAnswer[]> {
    return this.guard.run(() => this.below.sync(adds), this.deadlineMs, unanswered, 'sync', adds.length);
  }

  /** The nodes the `local` failure mode divides a limit by: as last counted, at least `expectedNodes`. */
  nodesSharing(): number {
    return this.nodes?.count() ?? this.expectedNodes;
  }

  override async close(): Promise<void> {
    this.nodes?.stop();
    await Promise.all([this.below.close(), this.local?.close()]);
  }

  /** The decision of `failureMode` when the store could not make it. */
  private fallbackOne(key: string, policy: CompiledPolicy, cost: number, now: number | undefined, mode: DecideMode, failureMode: FailureMode): Decision {
    const at = now ?? currentTime();
    if (failureMode === 'open') return failOpenDecision(policy, mode === 'limit' || mode === 'peek' ? cost : 0, at);
    if (failureMode === 'closed') return mode === 'look' ? unspent(failClosedDecision(policy, at)) : failClosedDecision(policy, at);
    return locally(this.localStore().one(key, this.localPolicy(policy), cost, at, mode) as Decision);
  }

  /**
   * The decisions of each limit's failure mode when the store could not decide them together.
   * Still all-or-nothing: the local limits record only when no limit denies for sure (`closed`).
   */
  private fallbackAll(requests: readonly GroupRequest[], modes: readonly FailureMode[], now: number | undefined, commit: boolean): Decision[] {
    const at = now ?? currentTime();
    const local = requests.filter((_, i) => modes[i] === 'local').map((request) => ({ ...request, policy: this.localPolicy(request.policy) }));
    const localDecisions = local.length === 0 ? [] : (this.localStore().all(local, at, 'limit', commit && !modes.includes('closed')) as Decision[]);
    let next = 0;
    return requests.map((request, i) => {
      if (modes[i] === 'open') return failOpenDecision(request.policy, request.cost, at);
      if (modes[i] === 'closed') return failClosedDecision(request.policy, at);
      return locally(localDecisions[next++]!);
    });
  }

  private localStore(): StoreLayer {
    return (this.local ??= new StoreLayer(memoryStore()));
  }

  private localPolicy(policy: CompiledPolicy): CompiledPolicy {
    const nodes = this.nodes?.count() ?? this.expectedNodes;
    let scaled = this.localPolicies.get(policy);
    if (scaled === undefined || scaled.nodes !== nodes) this.localPolicies.set(policy, (scaled = { nodes, policy: localPolicy(policy, nodes) }));
    return scaled.policy;
  }

  private deadline(options: LimitAllOptions | undefined): number {
    return options?.deadlineMs === undefined ? this.deadlineMs : options.deadlineMs;
  }
}
