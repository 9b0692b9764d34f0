/**
 * Reserve then settle on the memory store: the open reservations of this process, by (state,
 * key, id), beside the store's slots. Single-threaded, so a reserve (decide, then book) or a settle
 * (book, then adjust) cannot interleave with another call: each is as atomic as reserve.lua and
 * settle on Redis. The same answers as Redis (test/vectors/reservations/).
 */
import { adjustState, reservationMark } from '../algorithms/adjust.js';
import type { SlidingLog } from '../algorithms/sliding-log.js';
import type { Decision } from '../decision.js';
import { InvalidOptionError } from '../errors.js';
import type { CompiledPolicy } from '../policy.js';
import type { ReservedDecision, ReserveRequest, SettleRequest, Settlement } from './types.js';

/** What the book needs of the store: a decision, a copy of a key's state, a change to it in place. */
export interface ReservableStore {
  consume(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Decision;
  /** A copy of `key`'s state under `policy`, if it has one (a sliding log's: [its newest entry's time]). */
  stateOf(key: string, policy: CompiledPolicy): readonly number[] | undefined;
  /**
   * Runs `change` on `key`'s state at `now` (in `state` from `at`, or its sliding log; a fresh
   * state made for it if it has none and `create`), then answers a look (cost 0) at it after.
   */
  changeState(key: string, policy: CompiledPolicy, now: number | undefined, create: boolean, change: (state: Float64Array, at: number, now: number, log?: SlidingLog) => void): Decision;
}

interface Reservation {
  readonly cost: number;
  /** Where it was recorded (adjust.ts reservationMark): a window, a bucket, a log entry's time; else 0. */
  readonly mark: number;
  /** On the call's timeline: from then on it is closed (it stands at its estimate). */
  readonly expiresAt: number;
  /** Process clock instant after which the book may drop it. */
  readonly dropAt: number;
  readonly decision: Decision;
  /** The actual cost it was settled with, once settled. */
  settledCost: number | undefined;
}

/** Real time a reservation of an explicit `now` is kept past its ttl (a replay may lag real time). */
const REPLAY_SLACK_MS = 3_600_000;

export class MemoryReservations {
  private readonly book = new Map<string, Reservation>();
  /** The book's size after its last sweep: the next sweep comes when it has doubled. */
  private sweptAt = 64;

  /** `maxBooked`: most reservations held (the store's maxKeys); past it the oldest booked goes first, standing at its estimate. */
  constructor(
    private readonly store: ReservableStore,
    private readonly maxBooked: number,
  ) {}

  reserve(key: string, policy: CompiledPolicy, request: ReserveRequest, now: number | undefined): ReservedDecision {
    const at = now ?? Date.now();
    const name = entryName(key, policy, request.id);
    const open = this.open(name, at);
    if (open !== undefined) {
      if (open.cost !== request.cost) throw conflict(request, open.cost);
      return open.settledCost === undefined ? open.decision : { ...open.decision, settled: open.settledCost };
    }
    const decision = this.store.consume(key, policy, request.cost, now);
    // A refused reservation debits nothing, so it is not booked: a retry decides afresh.
    if (!decision.allowed) return decision;
    const state = this.store.stateOf(key, policy);
    const mark = state === undefined ? 0 : reservationMark(state, 0, policy);
    const expiresAt = decision.now + request.ttlMs;
    const dropAt = Date.now() + request.ttlMs + (now === undefined ? 0 : REPLAY_SLACK_MS);
    if (this.book.size >= 2 * this.sweptAt || this.book.size >= this.maxBooked) this.sweep();
    // Still full: the oldest booked goes (a flood of reservations cannot grow the process without bound).
    for (const oldest of this.book.keys()) {
      if (this.book.size < this.maxBooked) break;
      this.book.delete(oldest);
    }
    this.book.set(name, { cost: request.cost, mark, expiresAt, dropAt, decision, settledCost: undefined });
    return decision;
  }

  settle(key: string, policy: CompiledPolicy, request: SettleRequest, now: number | undefined): Settlement {
    const at = now ?? Date.now();
    const open = this.open(entryName(key, policy, request.id), at);
    if (open === undefined) return { status: 'unknown', reserved: 0, cost: 0, decision: this.store.changeState(key, policy, now, false, () => undefined) };
    if (open.settledCost !== undefined) return { status: 'repeated', reserved: open.cost, cost: open.settledCost, decision: this.store.changeState(key, policy, now, false, () => undefined) };
    open.settledCost = request.cost;
    const units = request.cost - open.cost;
    const decision = this.store.changeState(key, policy, now, units > 0, (state, base, time, log) => void adjustState(state, base, time, units, open.mark, policy, log));
    return { status: 'settled', reserved: open.cost, cost: request.cost, decision };
  }

  /**
   * The reservation booked under `name`, unless its ttl has passed at `at`. Judged on the call's
   * timeline and kept until the sweep (as a Redis record lives in real time): a replay whose clock
   * goes back sees it open again, as on Redis.
   */
  private open(name: string, at: number): Reservation | undefined {
    const reservation = this.book.get(name);
    return reservation !== undefined && at < reservation.expiresAt ? reservation : undefined;
  }

  /** Drops what no call can open any more: amortised O(1) per reservation. */
  private sweep(): void {
    const clock = Date.now();
    for (const [name, reservation] of this.book) if (reservation.dropAt <= clock) this.book.delete(name);
    this.sweptAt = Math.max(64, this.book.size);
  }
}

/** Ids are per key and state: the same id under another key or policy is another reservation. */
function entryName(key: string, policy: CompiledPolicy, id: string): string {
  return `${policy.stateId}\u0000${key}\u0000${id}`;
}

export function conflict(request: ReserveRequest, booked: number): InvalidOptionError {
  return new InvalidOptionError(`reserve: id ${JSON.stringify(request.id)} is already reserved for this key with cost ${booked}, not ${request.cost}; a retry must repeat its cost, a new reservation needs a new id`);
}
