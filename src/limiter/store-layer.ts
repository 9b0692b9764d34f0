/**
 * The bottom of the engine's stack and the only door to a `Store`: each mode of a decision becomes
 * the store call that makes it (a look is a peek of cost 0, reported unspent), a group one
 * `consumeAll`, local-first syncs one `addToWindow` per key; the heartbeat that counts the nodes
 * sharing the store (live-nodes.ts) one `heartbeat`; a concurrency slot (concurrency.ts) one
 * `acquireSlot` or `releaseSlot`.
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';
import type { LedgerStore } from '../store/ledger.js';
import type { MaybePromise, ReservedDecision, ReserveRequest, SettleRequest, Settlement, Store } from '../store/types.js';
import { InvalidOptionError } from '../errors.js';
import type { SlotAnswer, SlotRelease, SlotRequest } from '../store/slots.js';
import type { DecideMode } from './checks.js';
import { unspent, type DecisionLayer, type GroupRequest, type WindowAdd, type WindowSyncAnswer } from './layer.js';
import { isOutage } from './store-guard.js';

export class StoreLayer implements DecisionLayer {
  readonly name = 'store';

  constructor(private readonly store: Store) {}

  one(key: string, policy: CompiledPolicy, cost: number, now: number | undefined, mode: DecideMode): MaybePromise<Decision> {
    return decideOn(this.store, key, policy, cost, now, mode);
  }

  all(requests: readonly GroupRequest[], now: number | undefined, _mode: DecideMode, commit: boolean): MaybePromise<Decision[]> {
    return this.store.consumeAll(requests, now, commit);
  }

  /**
   * Each key's counts, or the error that key alone met (its state is another type or unreadable);
   * an outage fails them all, so the guard above sees it.
   */
  sync(adds: readonly WindowAdd[]): MaybePromise<WindowSyncAnswer[]> {
    const store = this.store;
    const answers = adds.map((add) => store.addToWindow!(add.key, add.policy, add.units, add.now));
    if (!answers.some((answer) => answer instanceof Promise)) return answers as WindowSyncAnswer[];
    return Promise.all(answers.map((answer) => Promise.resolve(answer).catch((error: unknown) => (isOutage(error) ? Promise.reject(error) : (error as Error)))));
  }

  /** The store's usage ledger (limiter/ledger.ts), if it keeps one. */
  get ledger(): LedgerStore | undefined {
    return this.store.ledger;
  }

  get storeName(): string {
    return this.store.name;
  }

  /** Whether the store counts the nodes sharing it (see {@link Store.heartbeat}). */
  get countsNodes(): boolean {
    return this.store.heartbeat !== undefined;
  }

  /** Marks this node alive for `ttlMs`; answers how many nodes share the store. */
  heartbeat(ttlMs: number): MaybePromise<number> {
    return this.store.heartbeat!(ttlMs);
  }

  /** Whether the store holds concurrency slots (limiter/concurrency.ts). */
  get holdsSlots(): boolean {
    return this.store.acquireSlot !== undefined && this.store.releaseSlot !== undefined;
  }

  acquireSlot(key: string, request: SlotRequest, now: number | undefined): MaybePromise<SlotAnswer> {
    return this.store.acquireSlot!(key, request, now);
  }

  releaseSlot(key: string, id: string, now: number | undefined): MaybePromise<SlotRelease> {
    return this.store.releaseSlot!(key, id, now);
  }

  /** Whether the store counts the slots held (`heldSlots`). */
  get countsSlots(): boolean {
    return this.store.heldSlots !== undefined;
  }

  heldSlots(keys: readonly string[], now: number | undefined): MaybePromise<number[]> {
    return this.store.heldSlots!(keys, now);
  }

  reset(key: string, policy: CompiledPolicy): MaybePromise<void> {
    return this.store.reset(key, policy);
  }

  resetPrefix(prefix: string): MaybePromise<number> {
    return this.store.resetPrefix(prefix);
  }

  close(): Promise<void> {
    return this.store.close();
  }

  reserve(key: string, policy: CompiledPolicy, request: ReserveRequest, now: number | undefined): MaybePromise<ReservedDecision> {
    if (this.store.reserve === undefined) throw noReservations(this.store);
    return this.store.reserve(key, policy, request, now);
  }

  settle(key: string, policy: CompiledPolicy, request: SettleRequest, now: number | undefined): MaybePromise<Settlement> {
    if (this.store.settle === undefined) throw noReservations(this.store);
    return this.store.settle(key, policy, request, now);
  }
}

/** One decision of `mode` on `store`. */
export function decideOn(store: Store, key: string, policy: CompiledPolicy, cost: number, now: number | undefined, mode: DecideMode): MaybePromise<Decision> {
  if (mode === 'limit') return store.consume(key, policy, cost, now);
  if (mode === 'peek') return store.peek(key, policy, cost, now);
  if (mode === 'probe') return store.peek(key, policy, 0, now);
  // A look is a peek of cost 0: the quota as it stands.
  const looked = store.peek(key, policy, 0, now);
  return looked instanceof Promise ? looked.then(unspent) : unspent(looked);
}

function noReservations(store: Store): InvalidOptionError {
  return new InvalidOptionError(`the ${store.name} store keeps no reservations: reserve/settle run on the memory, Redis and Memcached stores`);
}
