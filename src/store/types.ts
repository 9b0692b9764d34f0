/**
 * The `Store` interface: where decisions are made and state is kept. The limiter validates input
 * and compiles policies; a store receives only valid keys, compiled policies and integer costs.
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';
import type { SlotAnswer, SlotRelease, SlotRequest } from './slots.js';
import type { LedgerStore } from './ledger.js';

/** A value now or later: the memory store answers synchronously, network stores asynchronously. */
export type MaybePromise<T> = T | Promise<T>;

/** One request of a multi-limit decision. */
export interface StoreRequest {
  readonly key: string;
  readonly policy: CompiledPolicy;
  readonly cost: number;
}

/**
 * A window counter's counts, in the algorithm's state layout (algorithms/fixed-window.ts,
 * sliding-window.ts): `[count, window start]` for a fixed window, `[current count, current window
 * start, previous count]` for a sliding window. What local-first mode decides on between syncs.
 */
export interface WindowCounts {
  /** The store's time of the sync (epoch ms). */
  readonly now: number;
  readonly state: readonly number[];
}

export interface Store {
  /** Short name for logs and metrics, e.g. `memory` or `redis`. */
  readonly name: string;
  /** The limiter's default deadline for a call to this store, in ms, if the store has one. */
  readonly deadlineMs?: number | undefined;
  /**
   * Decides one request of `cost` for `key` under `policy` and records it if admitted.
   * `now` (epoch ms) overrides the store's own clock; undefined means "use the store's time".
   */
  consume(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): MaybePromise<Decision>;
  /** What `consume` would answer, without recording anything. `cost` may be 0: the quota as it stands. */
  peek(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): MaybePromise<Decision>;
  /**
   * Decides several requests together, all-or-nothing: each is evaluated, and only if every one is
   * admitted are they recorded (a denied sliding-log attempt with `countRejected` is still logged).
   * With `commit` false nothing is recorded (peek).
   */
  consumeAll(requests: readonly StoreRequest[], now: number | undefined, commit: boolean): MaybePromise<Decision[]>;
  /**
   * Local-first sync (fixed-window and sliding-window policies only): adds `units` (≥ 0; 0 only
   * reads) to the key's counter in the window of `now`, whatever the limit — the caller already
   * admitted them — and answers the counts after it. Stores without it cannot run local-first.
   */
  addToWindow?(key: string, policy: CompiledPolicy, units: number, now: number | undefined): MaybePromise<WindowCounts>;
  /**
   * Marks this store's node (one store object: the limiters sharing it count once) alive for
   * `ttlMs` and answers how many nodes sharing this store's state are alive, itself included.
   * Stores shared by several processes (Redis) have it; the `local` failure mode divides each
   * limit by the count last answered when the store stops answering.
   */
  heartbeat?(ttlMs: number): MaybePromise<number>;
  /** Reserve then settle (see {@link ReservationStore}); stores without it refuse reservations. */
  reserve?: ReservationStore['reserve'];
  settle?: ReservationStore['settle'];
  /**
   * Concurrency slots (slots.ts): takes a slot of `key` for `request.id` if fewer than
   * `request.limit` unexpired slots are held (an id already holding one renews it), atomically.
   * `now` as in `consume`. Stores without it cannot hold slots.
   */
  acquireSlot?(key: string, request: SlotRequest, now: number | undefined): MaybePromise<SlotAnswer>;
  /** Frees `id`'s slot of `key` if it still holds one; anything else is a no-op answering `released: false`. */
  releaseSlot?(key: string, id: string, now: number | undefined): MaybePromise<SlotRelease>;
  /** How many slots of each key are held at `now` (unexpired, unreleased), in order: a look, that takes none. */
  heldSlots?(keys: readonly string[], now: number | undefined): MaybePromise<number[]>;
  /** The usage ledger (ledger.ts); stores without one refuse policies with a `ledger`. */
  readonly ledger?: LedgerStore;
  /** Forgets `key`'s state under `policy`'s algorithm and window. */
  reset(key: string, policy: CompiledPolicy): MaybePromise<void>;
  /**
   * Forgets the state of every key that starts with `prefix` (a non-empty caller's key prefix, as
   * `consume` receives keys), under every policy; keys of other prefixes are left alone. Resolves
   * to how many states were removed. Not atomic: a key written while it runs may survive.
   */
  resetPrefix(prefix: string): MaybePromise<number>;
  /** Releases timers and connections. */
  close(): Promise<void>;
}

/**
 * Reserve then settle (docs/semantics.md "Reserve then settle"): one reservation of `cost` units
 * under `id`, held `ttlMs` (the store's clock, or `now`'s timeline).
 */
export interface ReserveRequest {
  readonly id: string;
  readonly cost: number;
  readonly ttlMs: number;
}

/** The settlement of reservation `id`: `cost` (≥ 0) is what the request actually took. */
export interface SettleRequest {
  readonly id: string;
  readonly cost: number;
}

/**
 * What a settle did: `settled` moved the difference now; `repeated` found it settled already and
 * changed nothing; `unknown` found no open reservation of that id (never made, refused, or its ttl
 * passed: it stands at its estimate) and changed nothing.
 */
export type SettlementStatus = 'settled' | 'repeated' | 'unknown';

export interface Settlement {
  readonly status: SettlementStatus;
  /** The reservation's estimate (0 when unknown). */
  readonly reserved: number;
  /** The actual cost it was settled with: this call's, or the first settle's when repeated (0 when unknown). */
  readonly cost: number;
  /** The quota as it stands after the settle: a look (cost 0), never refused but when overdrawn. */
  readonly decision: Decision;
}

/**
 * A reserve's answer: the decision, and `settled` when it is the retry of a reservation already
 * settled (its first decision, replayed: nothing counted now).
 */
export interface ReservedDecision extends Decision {
  /** Present on the retry of a reservation already settled: the actual cost it was settled with. */
  readonly settled?: number;
}

/** The reservation calls of a store that keeps them (memory, Redis). */
export interface ReservationStore {
  /** Reserves `request.cost` as `consume` would; a retried id answers its first decision (with `settled` once it is settled). */
  reserve(key: string, policy: CompiledPolicy, request: ReserveRequest, now: number | undefined): MaybePromise<ReservedDecision>;
  /** Refunds or charges the difference between `request.cost` and the estimate, once per id. */
  settle(key: string, policy: CompiledPolicy, request: SettleRequest, now: number | undefined): MaybePromise<Settlement>;
}
