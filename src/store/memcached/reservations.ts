/**
 * Reserve then settle on memcached (docs/semantics.md "Reserve then settle"): a key's reservation
 * records (records.ts) ride in its state item (state-item.ts), so a reserve debits the state and
 * books its record, and a settle refunds or charges the difference and marks the record settled,
 * each in one compare-and-set step. The same answers as the memory store and Redis
 * (test/vectors/reservations/). At most {@link MAX_RECORDS} records per key and state.
 */
import { adjustState, reservationMark } from '../../algorithms/adjust.js';
import type { Decision } from '../../decision.js';
import { InvalidOptionError } from '../../errors.js';
import type { CompiledPolicy } from '../../policy.js';
import { conflict } from '../reservations-memory.js';
import type { ReservedDecision, ReserveRequest, SettleRequest, Settlement } from '../types.js';
import type { ItemOp } from './cas-lanes.js';
import { realUntil } from './keys.js';
import { recordId, type ReservationRecord } from './records.js';
import { decideItem, type StateItem } from './state-item.js';

/** Most reservation records one key's state item holds (expired, then settled ones are dropped first). */
export const MAX_RECORDS = 1_000;
/** Real time a record of an explicit `now` is kept past its ttl (a replay may lag real time), as on the memory store. */
const REPLAY_SLACK_MS = 3_600_000;

/** The record of `id`, unless its ttl has passed at `at` (the calls' timeline). */
function openRecord(item: StateItem, id: string, at: number): ReservationRecord | undefined {
  const record = item.records.get(id);
  return record !== undefined && at < record.expiresAt ? record : undefined;
}

/** Drops the records no call can open any more; then, if the key is still at its bound, the oldest settled. */
function makeRoom(item: StateItem, clock: number): void {
  for (const [id, record] of item.records) if (record.dropAt <= clock) item.records.delete(id);
  for (const [id, record] of item.records) {
    if (item.records.size < MAX_RECORDS) return;
    if (record.settled >= 0) item.records.delete(id);
  }
  if (item.records.size >= MAX_RECORDS) {
    throw new InvalidOptionError(`reserve: this key already holds ${MAX_RECORDS} open reservations, the most a memcached item keeps per key; settle some first, use fewer concurrent reservations per key, or the memory or Redis store`);
  }
}

/** A reserve as one compare-and-set step: the decision of a consume and, if admitted, its record beside the state. */
export function reserveOp(policy: CompiledPolicy, request: ReserveRequest, now: number | undefined): ItemOp<StateItem, ReservedDecision> {
  const id = recordId(request.id);
  return (item, clock) => {
    const at = now ?? clock;
    const explicit = now !== undefined;
    const open = openRecord(item, id, at);
    if (open !== undefined) {
      if (open.cost !== request.cost) throw conflict(request, open.cost);
      return { value: open.settled < 0 ? open.decision : { ...open.decision, settled: open.settled }, until: 0 };
    }
    makeRoom(item, clock);
    const decision = decideItem(item, at, request.cost, policy, true, explicit);
    const until = realUntil(decision.resetAt, at, explicit);
    // A refused reservation debits nothing, so it is not booked: a retry decides afresh.
    if (!decision.allowed) return { value: decision, until };
    const dropAt = clock + request.ttlMs + (explicit ? REPLAY_SLACK_MS : 0);
    item.records.delete(id);
    item.records.set(id, { cost: request.cost, mark: reservationMark(item.state, 0, policy), expiresAt: decision.now + request.ttlMs, dropAt, settled: -1, decision });
    item.keepUntil = Math.max(item.keepUntil, dropAt);
    return { value: decision, until: Math.max(until, dropAt) };
  };
}

/** A settle as one compare-and-set step: the difference refunded or charged, the record marked settled. */
export function settleOp(policy: CompiledPolicy, request: SettleRequest, now: number | undefined): ItemOp<StateItem, Settlement> {
  const id = recordId(request.id);
  return (item, clock) => {
    const at = now ?? clock;
    const explicit = now !== undefined;
    const look = (): Applied => {
      const decision = decideItem(item, at, 0, policy, false, explicit);
      return { decision, until: realUntil(decision.resetAt, at, explicit) };
    };
    const open = openRecord(item, id, at);
    if (open === undefined) return answer('unknown', 0, 0, look());
    if (open.settled >= 0) return answer('repeated', open.cost, open.settled, look());
    open.settled = request.cost;
    adjustState(item.state, 0, at, request.cost - open.cost, open.mark, policy);
    return answer('settled', open.cost, request.cost, look());
  };
}

interface Applied {
  readonly decision: Decision;
  readonly until: number;
}

function answer(status: Settlement['status'], reserved: number, cost: number, { decision, until }: Applied): { value: Settlement; until: number } {
  return { value: { status, reserved, cost, decision }, until };
}
