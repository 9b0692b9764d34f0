/**
 * Reservation records as a memcached state item holds them (state-item.ts; reservations.ts makes
 * and settles them). A record is `<id>,<cost>,<mark>,<expires at>,<drop at>,<settled>,<limit>,<remaining>,<reset at>,<retry after>,<decided at>,<delay>`:
 * the id percent-encoded (or `#` and its SHA-256 when that is long), settled -1 while open, delay
 * -1 when the decision has none; `drop at` is the writer's clock instant past which no call can
 * open it (its ttl, plus an hour for a replay). At most {@link MAX_RECORDS} per key and state.
 */
import { createHash } from 'node:crypto';
import type { Decision } from '../../decision.js';
import { foreignValue } from './keys.js';

/** Ids longer than this (percent-encoded) are recorded as their SHA-256: a record stays under ~200 bytes. */
const MAX_LITERAL_ID = 43;
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
