/**
 * The engine's layers: each mode that stands between a checked call and the store is one
 * {@link DecisionLayer}, wrapping the layer below it. `core.ts` composes them in one written order
 * ({@link LAYER_ORDER}) that every entry point follows — `decide` and `decideAll`, in every
 * {@link DecideMode} (limit, peek, look, probe):
 *
 *   core (input checked once, the policy cache, the call's time, limit 0, tracing around)
 *     → over-limit cache → lease / local-first → guard (deadline, breaker, failure modes) → store
 *
 * A layer answers a call itself or passes it down, and sees every answer that comes back up
 * through it: the over-limit cache remembers denials and forgets a key whose group may have
 * recorded, a lease records the permits it took. Resets, closing and local-first's syncs travel
 * down the same stack, so each layer forgets what it holds of a reset key on its own hook.
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';
import type { MaybePromise, ReservedDecision, ReserveRequest, SettleRequest, Settlement, StoreRequest, WindowCounts } from '../store/types.js';
import type { DecideMode, LimitAllOptions, LimitOptions } from './checks.js';
import type { LimiterFailureMode } from './failure-modes.js';

/** The layers, outermost first; a layer that is off is left out of the stack, never reordered. */
export const LAYER_ORDER = ['over-limit-cache', 'lease', 'local-first', 'guard', 'store'] as const;
export type LayerName = (typeof LAYER_ORDER)[number];

/** One limit of a group decided together, checked: what `limitAll` hands down. */
export interface GroupRequest extends StoreRequest {
  /** This limit's own failure mode, over the call's and the limiter's. */
  readonly failureMode: LimiterFailureMode | undefined;
}

/** One key's local-first sync: add `units` to its window counter at `now` (undefined: the store's time). */
export interface WindowAdd {
  readonly key: string;
  readonly policy: CompiledPolicy;
  readonly units: number;
  readonly now: number | undefined;
}

/** A sync's answer per key: the counts, or the error that key alone met. */
export type WindowSyncAnswer = WindowCounts | Error;

/**
 * One layer of the engine. Every argument is checked by the core: keys well-formed, policies
 * compiled, costs whole (0 for a look or a probe), `now` whole ms or undefined (the store's time).
 *
 * A layer that keeps state per key must see every decision that can change that key's state: it
 * sees each answer to `one` it passes down, and each group it passes down with `commit` (which may
 * record under every key of the group), and it must forget the key on `reset` / `resetPrefix`.
 */
export interface DecisionLayer {
  readonly name: LayerName;
  /** One limit of one request: answered here, or by the layers below. */
  one(key: string, policy: CompiledPolicy, cost: number, now: number | undefined, mode: DecideMode, options: LimitOptions | undefined): MaybePromise<Decision>;
  /**
   * Several limits of one request, all-or-nothing (`commit`: whether admitted limits record; false
   * for a peek, a look, a probe, or a group with a limit of 0). Answers in the order asked.
   */
  all(requests: readonly GroupRequest[], now: number | undefined, mode: DecideMode, commit: boolean, options: LimitAllOptions | undefined): MaybePromise<Decision[]>;
  /** Local-first syncs of one tick, in one store call (an outage fails them all). */
  sync(adds: readonly WindowAdd[]): MaybePromise<WindowSyncAnswer[]>;
  /** `key`'s state under `policy` is reset: forget what this layer holds of it, then pass it down. */
  reset(key: string, policy: CompiledPolicy): MaybePromise<void>;
  /** Every key starting with `prefix` is reset: forget what this layer holds, then pass it down. */
  resetPrefix(prefix: string): MaybePromise<number>;
  /** Closing: this layer's own work first (local-first pushes its unsent units), then the layers below. */
  close(): Promise<void>;
  /** Reserve then settle (reservations.ts): a reservation of `request.cost`, decided as a limit of it. */
  reserve(key: string, policy: CompiledPolicy, request: ReserveRequest, now: number | undefined, options: LimitOptions | undefined): MaybePromise<ReservedDecision>;
  /** The settle of a reservation: the difference refunded or charged, once per id. */
  settle(key: string, policy: CompiledPolicy, request: SettleRequest, now: number | undefined, options: LimitOptions | undefined): MaybePromise<Settlement>;
}

/** A layer that adds nothing to a call it does not handle: each method passes it to `below`. */
export abstract class PassThroughLayer implements DecisionLayer {
  abstract readonly name: LayerName;

  constructor(protected readonly below: DecisionLayer) {}

  /** The layer below this one. */
  get next(): DecisionLayer {
    return this.below;
  }

  one(key: string, policy: CompiledPolicy, cost: number, now: number | undefined, mode: DecideMode, options: LimitOptions | undefined): MaybePromise<Decision> {
    return this.below.one(key, policy, cost, now, mode, options);
  }

  all(requests: readonly GroupRequest[], now: number | undefined, mode: DecideMode, commit: boolean, options: LimitAllOptions | undefined): MaybePromise<Decision[]> {
    return this.below.all(requests, now, mode, commit, options);
  }

  sync(adds: readonly WindowAdd[]): MaybePromise<WindowSyncAnswer[]> {
    return this.below.sync(adds);
  }

  reset(key: string, policy: CompiledPolicy): MaybePromise<void> {
    this.forget(key, policy);
    return this.below.reset(key, policy);
  }

  resetPrefix(prefix: string): MaybePromise<number> {
    this.clear();
    return this.below.resetPrefix(prefix);
  }

  close(): Promise<void> {
    return this.below.close();
  }

  reserve(key: string, policy: CompiledPolicy, request: ReserveRequest, now: number | undefined, options: LimitOptions | undefined): MaybePromise<ReservedDecision> {
    return this.below.reserve(key, policy, request, now, options);
  }

  settle(key: string, policy: CompiledPolicy, request: SettleRequest, now: number | undefined, options: LimitOptions | undefined): MaybePromise<Settlement> {
    return this.below.settle(key, policy, request, now, options);
  }

  /** Forgets what this layer holds of `key` under `policy` (its reset hook). */
  protected forget(key: string, policy: CompiledPolicy): void {
    void key;
    void policy;
  }

  /** Forgets everything this layer holds (a prefix reset). */
  protected clear(): void {}
}

/** What a layer keeps per key, as its reset hooks and stats see it. */
export interface KeyBook<Stats> {
  stats(): Stats;
  /** Forgets `key` under `policy`. */
  forget(key: string, policy: CompiledPolicy): void;
  /** Forgets every key. */
  clear(): void;
}

/**
 * A layer whose state is a book of keys, made on the first call that uses it: until then it holds
 * nothing to forget and has no stats.
 */
export abstract class BookLayer<Book extends KeyBook<Stats>, Stats> extends PassThroughLayer {
  private made: Book | undefined;

  /** Makes the book, on the first call that needs it. */
  protected abstract makeBook(): Book;

  /** The book, made now if it was not. */
  protected get book(): Book {
    return (this.made ??= this.makeBook());
  }

  /** The book if a call made it. */
  protected get existingBook(): Book | undefined {
    return this.made;
  }

  /** The book's counters, once the layer was used. */
  stats(): Stats | undefined {
    return this.made?.stats();
  }

  protected override forget(key: string, policy: CompiledPolicy): void {
    this.made?.forget(key, policy);
  }

  protected override clear(): void {
    this.made?.clear();
  }
}

/**
 * A look spends nothing and is never refused: a peek of cost 0 is denied only when more than the
 * capacity is already logged (a sliding log with `countRejected`), which a look reports as allowed
 * with nothing remaining.
 */
export function unspent(decision: Decision): Decision {
  if (decision.allowed) return decision;
  const { limit, remaining, resetAt, now, delay } = decision;
  return delay === undefined
    ? { allowed: true, limit, remaining, resetAt, retryAfter: 0, now }
    : { allowed: true, limit, remaining, resetAt, retryAfter: 0, now, delay };
}
