/**
 * The reference model of reserve then settle, written from docs/semantics.md "Reserve then settle"
 * alone over the algorithms of ./reference.ts: one key's state, the open reservations by id, and
 * each refund or charge as the spec words it (nothing of src/ is imported: the model must not test
 * the code against itself).
 */
import { bucketsAt, bucketsDecide, freshBuckets, type BucketState } from './buckets-reference.js';
import { capacityOf, fixedWindowDecide, levelDecide, slidingLogDecide, slidingWindowDecide, type Decide, type ModelDecision, type ModelPolicy } from './reference.js';

/** A calendar period [start, end) holding an instant (written from the calendar's definition, not src/). */
export type Period = (now: number) => { readonly start: number; readonly end: number };

/** What a reservation schedule may add to a model policy: a calendar window's periods, a penalty. */
export interface ReservationExtras {
  /** A fixed window counting in these periods instead of multiples of its window (its window: the nominal length). */
  readonly period?: Period;
  /** `blockDuration` in ms: a denial of a reserve or a limit blocks the key that long. */
  readonly blockMs?: number;
}

/** A decision of the model, a blocked one included. */
type Answer = Omit<ModelDecision, 'reason'> & { readonly reason?: 'cost-exceeds-capacity' | 'blocked' };

/** What the model says of a settle: the figures a settle answers, and what remains after it. */
export interface ModelSettlement {
  readonly status: 'settled' | 'repeated' | 'unknown';
  readonly reserved: number;
  readonly cost: number;
  readonly remaining: number;
}

export interface ReservationKeyModel {
  /** The decision, or 'conflict' when the id is booked with another cost. */
  reserve(now: number, id: string, cost: number, ttl: number): Answer | 'conflict';
  settle(now: number, id: string, cost: number): ModelSettlement;
  limit(now: number, cost: number): Answer;
}

interface Booking {
  readonly cost: number;
  readonly mark: number;
  readonly expiresAt: number;
  readonly decision: Answer;
  settledCost?: number;
}

/** One algorithm's state, its decisions, the mark of a recorded reservation, and a refund or charge of `units`. */
interface Ledger<S> {
  readonly initial: S;
  readonly decide: Decide<S>;
  mark(state: S): number;
  adjust(state: S, now: number, units: number, mark: number): S;
}

const moved = (count: number, units: number, cap: number): number => (units < 0 ? Math.max(0, count + units) : Math.max(count, Math.min(count + units, cap)));

/** Buckets and GCRA: the level drained to `now`, moved by units × W at once (never below empty, at most 2·C·W). */
function levelLedger(policy: ModelPolicy): Ledger<{ level: number; last: number }> {
  const { capacity: C } = capacityOf(policy);
  const W = policy.window;
  return {
    initial: { level: 0, last: 0 },
    decide: levelDecide(policy),
    mark: () => 0,
    adjust(state, now, units) {
      const level = Math.max(0, state.level - (now - state.last) * policy.limit);
      if (units < 0 && level === 0) return state;
      return { level: moved(level, units * W, 2 * C * W), last: now };
    },
  };
}

/** A fixed window: a refund only in the reservation's window while it runs; a charge in the window of `now`. */
function fixedWindowLedger(policy: ModelPolicy): Ledger<{ start: number; count: number } | undefined> {
  const { capacity: C } = capacityOf(policy);
  const W = policy.window;
  const firstHit = policy.windowStart === 'first-hit';
  return {
    initial: undefined,
    decide: fixedWindowDecide(policy),
    mark: (state) => state!.start,
    adjust(state, now, units, mark) {
      if (units < 0) {
        if (state === undefined || state.start !== mark) return state;
        const live = firstHit ? now < state.start + W : Math.floor(now / W) * W <= state.start;
        if (!live) return state;
        const count = moved(state.count, units, 2 * C);
        // A window refunded to nothing is a fresh key's.
        return count === 0 ? undefined : { start: state.start, count };
      }
      const start = firstHit ? (state !== undefined && now < state.start + W ? state.start : now) : Math.max(Math.floor(now / W) * W, state?.start ?? -Infinity);
      const count = state !== undefined && state.start === start ? state.count : 0;
      return { start, count: moved(count, units, 2 * C) };
    },
  };
}

/**
 * A calendar window: a fixed window whose windows are the periods; a clock that went back keeps
 * counting in the later stored period. A refund only in the reservation's period while it runs (or
 * a clock that went back before it); a charge in the period of `now`.
 */
function calendarLedger(policy: ModelPolicy, period: Period): Ledger<{ start: number; count: number } | undefined> {
  const { nominal, capacity: C, softExtra } = capacityOf(policy);
  const startOf = (state: { start: number; count: number } | undefined, now: number): number => Math.max(period(now).start, state?.start ?? -Infinity);
  const decide: Decide<{ start: number; count: number } | undefined> = (stored, now, cost) => {
    const start = startOf(stored, now);
    const end = period(start).end;
    const count = stored !== undefined && stored.start === start ? stored.count : 0;
    const admit = cost <= C && count + cost <= C;
    const after = admit ? count + cost : count;
    const decision = {
      limit: nominal,
      now,
      allowed: admit,
      remaining: Math.max(0, C - after - softExtra),
      resetAt: after > 0 ? end : now,
      // Cost past the capacity: check back after the nominal length.
      retryAfter: admit ? 0 : cost > C ? policy.window : end - now,
      ...(cost > C ? { reason: 'cost-exceeds-capacity' as const } : {}),
    };
    return { decision, next: admit ? { start, count: after } : stored };
  };
  return {
    initial: undefined,
    decide,
    mark: (state) => state!.start,
    adjust(state, now, units, mark) {
      if (units < 0) {
        if (state === undefined || state.start !== mark || period(now).start > state.start) return state;
        const count = moved(state.count, units, 2 * C);
        return count === 0 ? undefined : { start: state.start, count };
      }
      const start = startOf(state, now);
      const count = state !== undefined && state.start === start ? state.count : 0;
      return { start, count: moved(count, units, 2 * C) };
    },
  };
}

/** A sliding window: a refund in the reservation's window while it is the current or the previous one; a charge in the current one. */
function slidingWindowLedger(policy: ModelPolicy): Ledger<{ current: number; start: number; previous: number }> {
  const { capacity: C } = capacityOf(policy);
  const W = policy.window;
  return {
    initial: { current: 0, start: -Infinity, previous: 0 },
    decide: slidingWindowDecide(policy),
    mark: (state) => state.start,
    adjust(state, now, units, mark) {
      const start = Math.max(Math.floor(now / W) * W, state.start);
      if (units < 0) {
        if (start - mark >= 2 * W) return state;
        if (state.start === mark) return { ...state, current: moved(state.current, units, 2 * C) };
        if (state.start === mark + W) return { ...state, previous: moved(state.previous, units, 2 * C) };
        return state;
      }
      let current = 0;
      let previous = 0;
      if (state.start === start) [current, previous] = [state.current, state.previous];
      else if (state.start === start - W) previous = state.current;
      return { current: moved(current, units, 2 * C), start, previous };
    },
  };
}

type LogEntries = readonly { readonly t: number; readonly weight: number }[];

/**
 * A sliding log: a reservation is its entry (the newest after it, `t`). A refund takes the units
 * off that entry while it is in the rolling window (`t > now − W`), never below 0, an entry left
 * at 0 gone; a charge is logged at `now` (the newest entry's time if later) as a decision logs,
 * the window's weight at most 2·C.
 */
function slidingLogLedger(policy: ModelPolicy): Ledger<LogEntries> {
  const { capacity: C } = capacityOf(policy);
  const W = policy.window;
  const decide = slidingLogDecide(policy);
  return {
    initial: [],
    // A decision drops the entries out of the window, denied or not (slidingLogDecide).
    decide,
    mark: (log) => log.at(-1)!.t,
    adjust(log, now, units, mark) {
      if (units < 0) {
        const entry = log.find((one) => one.t === mark);
        if (entry === undefined || mark <= now - W) return log;
        const weight = moved(entry.weight, units, 2 * C);
        return log.flatMap((one) => (one !== entry ? [one] : weight === 0 ? [] : [{ t: one.t, weight }]));
      }
      const live = log.filter((one) => one.t > now - W);
      const total = live.reduce((sum, one) => sum + one.weight, 0);
      const added = moved(total, units, 2 * C) - total;
      if (added === 0) return log;
      const newest = live.at(-1);
      const t = Math.max(now, newest?.t ?? -Infinity);
      return newest !== undefined && newest.t === t ? [...live.slice(0, -1), { t, weight: newest.weight + added }] : [...live, { t, weight: added }];
    },
  };
}

/**
 * A sliding window of precision N: a reservation is its bucket (the index after it). A refund
 * takes the units off that bucket's count while the estimate reads it (one of the N + 1 newest
 * positions at `now`: whole, or weighted by its share inside the window), never below 0; a charge
 * adds to the bucket of `now`, a count at most 2·C.
 */
function bucketsLedger(policy: ModelPolicy): Ledger<BucketState> {
  const { capacity: C } = capacityOf(policy);
  const N = policy.precision!;
  return {
    initial: freshBuckets(N),
    decide: bucketsDecide(policy),
    mark: (state) => state.index,
    adjust(state, now, units, mark) {
      const { b, c } = bucketsAt(state, now, policy);
      if (units < 0) {
        // In place: the state keeps its index (a clock that goes back later counts from it).
        const position = state.index - mark;
        if (b - mark > N || position < 0 || position > N || state.counts[position] === 0) return state;
        return { index: state.index, counts: state.counts.map((count, k) => (k === position ? moved(count, units, 2 * C) : count)) };
      }
      c[0] = moved(c[0]!, units, 2 * C);
      return { index: b, counts: c };
    },
  };
}

/** The answer while blocked until `until`: denied, nothing remaining, a retry at the block's end or the state's own (docs/semantics.md "Penalties"). */
function blocked(look: Answer, until: number, now: number): Answer {
  const { limit } = look;
  return { allowed: false, limit, remaining: 0, resetAt: Math.max(look.resetAt, until), retryAfter: Math.max(until - now, look.allowed ? 0 : look.retryAfter), now, reason: 'blocked' };
}

function keyModel<S>(ledger: Ledger<S>, blockMs: number): ReservationKeyModel {
  let state = ledger.initial;
  let blockedUntil = -Infinity;
  const book = new Map<string, Booking>();
  const open = (id: string, now: number): Booking | undefined => {
    const booking = book.get(id);
    return booking !== undefined && now < booking.expiresAt ? booking : undefined;
  };
  // A settle's look: while blocked nothing remains.
  const remaining = (now: number): number => (blockedUntil > now ? 0 : ledger.decide(state, now, 0).decision.remaining);
  // A reserve or a limit: blocked, or decided; a plain denial starts a block.
  const decide = (now: number, cost: number): Answer => {
    if (blockedUntil > now) return blocked(ledger.decide(state, now, cost).decision, blockedUntil, now);
    const { decision, next } = ledger.decide(state, now, cost);
    state = next;
    if (blockMs === 0 || decision.allowed || decision.reason !== undefined) return decision;
    blockedUntil = now + blockMs;
    return blocked(decision, blockedUntil, now);
  };
  return {
    reserve(now, id, cost, ttl) {
      const booked = open(id, now);
      if (booked !== undefined) return booked.cost !== cost ? 'conflict' : booked.settledCost === undefined ? booked.decision : { ...booked.decision, settled: booked.settledCost };
      const decision = decide(now, cost);
      if (decision.allowed) book.set(id, { cost, mark: ledger.mark(state), expiresAt: now + ttl, decision });
      return decision;
    },
    settle(now, id, cost) {
      const booked = open(id, now);
      if (booked === undefined) return { status: 'unknown', reserved: 0, cost: 0, remaining: remaining(now) };
      if (booked.settledCost !== undefined) return { status: 'repeated', reserved: booked.cost, cost: booked.settledCost, remaining: remaining(now) };
      booked.settledCost = cost;
      // Never a block: a settle is not a decision (the work is done).
      if (cost !== booked.cost) state = ledger.adjust(state, now, cost - booked.cost, booked.mark);
      return { status: 'settled', reserved: booked.cost, cost, remaining: remaining(now) };
    },
    limit(now, cost) {
      return decide(now, cost);
    },
  };
}

/** A fresh key under `policy` (every algorithm, a sliding window of any precision), with a calendar window's periods or a penalty. */
export function reservationModel(policy: ModelPolicy, extras: ReservationExtras = {}): ReservationKeyModel {
  const blockMs = extras.blockMs ?? 0;
  if (extras.period !== undefined) return keyModel(calendarLedger(policy, extras.period), blockMs);
  if (policy.algorithm === 'fixed-window') return keyModel(fixedWindowLedger(policy), blockMs);
  if (policy.algorithm === 'sliding-window' && (policy.precision ?? 1) > 1) return keyModel(bucketsLedger(policy), blockMs);
  if (policy.algorithm === 'sliding-window') return keyModel(slidingWindowLedger(policy), blockMs);
  if (policy.algorithm === 'sliding-log') return keyModel(slidingLogLedger(policy), blockMs);
  return keyModel(levelLedger(policy), blockMs);
}
