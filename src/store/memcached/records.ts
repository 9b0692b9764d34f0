/**
 * Reserve then settle on memcached (docs/semantics.md "Reserve then settle"): a key's reservation
 * records ride in its state item (state-item.ts), so a reserve debits the state and books its
 * record, and a settle refunds or charges the difference and marks the record settled, each in one
 * compare-and-set step. The same answers as the memory store and Redis (test/vectors/reservations/).
 *
 * A record is `<id>,<cost>,<mark>,<expires at>,<drop at>,<settled>,<limit>,<remaining>,<reset at>,<retry after>,<decided at>,<delay>`:
 * the id percent-encoded (or `#` and its SHA-256 when that is long), settled -1 while open, delay
 * -1 when the decision has none; `drop at` is the writer's clock instant past which no call can
 * open it (its ttl, plus an hour for a replay). At most {@link MAX_RECORDS} per key and state.
 */
import { createHash } from 'node:crypto';
import { adjustState, reservationMark } from '../../algorithms/adjust.js';
import type { Decision } from '../../decision.js';
import { InvalidOptionError } from '../../errors.js';
import type { CompiledPolicy } from '../../policy.js';
import { conflict } from '../reservations-memory.js';
import type { ReservedDecision, ReserveRequest, SettleRequest, Settlement } from '../types.js';
import type { ItemOp } from './cas-lanes.js';
import { foreignValue, realUntil } from './keys.js';
import { decideItem, type StateItem } from './state-item.js';

/** Most reservation records one key's state item holds (expired, then settled ones are dropped first). */
export const MAX_RECORDS = 1_000;
/** Ids longer than this (percent-encoded) are recorded as their SHA-256: a record stays under ~200 bytes. */
const MAX_LITERAL_ID = 43;
/** Real time a record of an explicit `now` is kept past its ttl (a replay may lag real time), as on the memory store. */
const REPLAY_SLACK_MS = 3_600_000;
const FIELDS = 12;

export interface ReservationRecord {
  readonly cost: number;
  /** The window it was recorded in (window counters), else 0. */
  readonly mark: number;
  /** On the calls' timeline: from then on it is closed (it stands at its estimate). */
  readonly expiresAt: number;
  /** This node's clock instant after which it may be dropped. */
  readonly dropAt: number;
  /** The actual cost it was settled with; -1 while open. */
  settled: number;
  /** Its reserve's decision, answered again to a retry. */
  readonly decision: Decision;
}

/** The id as a record names it: percent-encoded, or `#` and its SHA-256 (no literal starts with `#`). */
export function recordId(id: string): string {
  const literal = encodeURIComponent(id);
  return literal.length <= MAX_LITERAL_ID ? literal : `#${createHash('sha256').update(id).digest('base64url')}`;
}

export function encodeRecords(records: ReadonlyMap<string, ReservationRecord>): string {
  const parts: string[] = [];
  for (const [id, r] of records) {
    const d = r.decision;
    parts.push([id, r.cost, r.mark, r.expiresAt, r.dropAt, r.settled, d.limit, d.remaining, d.resetAt, d.retryAfter, d.now, d.delay ?? -1].join(','));
  }
  return parts.join('/');
}

export function decodeRecords(key: string, text: string, into: Map<string, ReservationRecord>): void {
  for (const part of text.split('/')) {
    const fields = part.split(',');
    const numbers = fields.slice(1).map(Number);
    if (fields.length !== FIELDS || fields[0] === '' || numbers.some((n) => !Number.isFinite(n))) throw foreignValue(key, text);
    const [cost, mark, expiresAt, dropAt, settled, limit, remaining, resetAt, retryAfter, now, delay] = numbers as [number, number, number, number, number, number, number, number, number, number, number];
    const decision: Decision = { allowed: true, limit, remaining, resetAt, retryAfter, now, ...(delay >= 0 ? { delay } : {}) };
    into.set(fields[0]!, { cost, mark, expiresAt, dropAt, settled, decision });
  }
}

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
