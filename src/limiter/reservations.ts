/**
 * Reserve then settle through the engine (docs/semantics.md "Reserve then settle"): the options of
 * `limiter.reserve` and `limiter.settle`, their checks, and what the core does of a call before it
 * goes down the stack of layers (the over-limit cache forgets a settled key, the guard answers a
 * reserve the store could not with the failure mode and rejects a settle, the store layer asks the
 * store). For a request whose cost is known after it ran: LLM tokens, rows, bytes.
 */
import { reservationRefusal } from '../algorithms/adjust.js';
import { InvalidCostError, InvalidOptionError, describeValue } from '../errors.js';
import { checkOptions, checkWholeNumber } from '../options.js';
import type { CompiledPolicy } from '../policy.js';
import type { ReserveRequest, SettleRequest } from '../store/types.js';
import { checkCost, checkNow, type LimitOptions } from './checks.js';
import { checkDeadline, checkFailureMode } from './failure-modes.js';

export type { ReservedDecision, ReserveRequest, SettleRequest, Settlement, SettlementStatus } from '../store/types.js';

/** Options of `limiter.reserve`. */
export interface ReserveOptions extends Pick<LimitOptions, 'now' | 'failureMode' | 'deadlineMs'> {
  /** The estimate debited now: a whole number ≥ 1. */
  readonly cost: number;
  /** The reservation's id, unique per key (1 to 256 characters): a retry with it counts once. */
  readonly id: string;
  /** How long it waits for its settle, ms (1 to 86,400,000; default 60,000): then it stands at its estimate. */
  readonly ttl?: number;
}

/** Options of `limiter.settle`. */
export interface SettleOptions extends Pick<LimitOptions, 'now' | 'deadlineMs'> {
  /** The id the reservation was made with. */
  readonly id: string;
  /** What the request actually took: a whole number ≥ 0 (0 refunds the whole estimate). */
  readonly cost: number;
}

export const DEFAULT_RESERVATION_TTL_MS = 60_000;
export const MAX_RESERVATION_TTL_MS = 86_400_000;
export const MAX_RESERVATION_ID_LENGTH = 256;

const RESERVE_OPTIONS = ['cost', 'id', 'ttl', 'now', 'failureMode', 'deadlineMs'];
const SETTLE_OPTIONS = ['id', 'cost', 'now', 'deadlineMs'];

/** Throws when `policy` cannot take reservations (reservationRefusal names the alternative). */
export function checkReservable(policy: CompiledPolicy, where: string): void {
  const refusal = reservationRefusal(policy);
  if (refusal !== undefined) throw new InvalidOptionError(`${where}: ${refusal}`);
}

function checkId(id: unknown, where: string): string {
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_RESERVATION_ID_LENGTH) {
    throw new InvalidOptionError(`${where}: id must be a string of 1 to ${MAX_RESERVATION_ID_LENGTH} characters naming the reservation (e.g. the request's id), got ${describeValue(id)}`);
  }
  return id;
}

/** The checked reserve: its request, and the call's time (undefined: the store's). */
export function checkReserveOptions(options: unknown): { request: ReserveRequest; now: number | undefined; deadlineMs: number | undefined } {
  checkOptions('reserve', options, RESERVE_OPTIONS, "{ cost: 1000, id: 'req-1', ttl: 60_000 }");
  const given = options as Partial<ReserveOptions>;
  if (given.failureMode !== undefined) checkFailureMode(given.failureMode, 'reserve: failureMode');
  const ttlMs = checkWholeNumber(given.ttl, { name: 'reserve: ttl', min: 1, max: MAX_RESERVATION_TTL_MS, unit: 'ms', meaning: 'how long the reservation waits for its settle', fallback: DEFAULT_RESERVATION_TTL_MS });
  const request = { id: checkId(given.id, 'reserve'), cost: checkCost(given.cost), ttlMs };
  return { request, now: given.now === undefined ? undefined : checkNow(given.now), deadlineMs: checkedDeadline(given.deadlineMs) };
}

/** The checked settle: its request, and the call's time (undefined: the store's). */
export function checkSettleOptions(options: unknown): { request: SettleRequest; now: number | undefined; deadlineMs: number | undefined } {
  checkOptions('settle', options, SETTLE_OPTIONS, "{ id: 'req-1', cost: 734 }");
  const given = options as Partial<SettleOptions>;
  const cost = given.cost;
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
    throw new InvalidCostError(`settle: cost is what the request actually took, a whole number ≥ 0, got ${describeValue(cost)}`);
  }
  return { request: { id: checkId(given.id, 'settle'), cost }, now: given.now === undefined ? undefined : checkNow(given.now), deadlineMs: checkedDeadline(given.deadlineMs) };
}

function checkedDeadline(deadlineMs: unknown): number | undefined {
  if (deadlineMs === undefined) return undefined;
  checkDeadline(deadlineMs, 'deadlineMs');
  return deadlineMs as number;
}
