/**
 * Reserve then settle on Redis: the keys, arguments and reply of scripts/reservation.lua. A
 * reservation's record is named after its key's state, `<state key>:r:<id>`, so it carries the same
 * hash tag and lives in the same Cluster slot: one script call reads and writes both atomically.
 */
import type { Decision, DecisionReason } from '../../decision.js';
import { StoreDataError } from '../../errors.js';
import { currentTime } from '../../clock.js';
import type { CompiledPolicy } from '../../policy.js';
import { conflict } from '../reservations-memory.js';
import type { ReservedDecision, ReserveRequest, SettleRequest, Settlement, SettlementStatus } from '../types.js';
import { escapeKeyPart } from './keys.js';
import { RESERVATION_SCRIPTS, type RedisScript } from './lua.js';
import { REASON_BLOCKED, REASON_BLOCK_STARTED, REASON_CLOCK_OUTSIDE_PERIODS, REASON_COST_EXCEEDS_CAPACITY, REASON_CORRUPT_STATE, REASON_WRONG_TYPE, clockOutsidePeriodsError, policyFields } from './protocol.js';

export const OP_RESERVE = 1;
export const OP_SETTLE = 2;

const STATUS_REPLAY = 1;
const STATUS_CONFLICT = 2;
const SETTLE_STATUSES: Readonly<Record<number, SettlementStatus>> = { 0: 'settled', 1: 'repeated', 3: 'unknown' };

/** Runs `script` on `keys` with `args` (the store's EVALSHA, its failures described). */
export type ScriptRun = (script: RedisScript, keys: string[], args: (string | number)[]) => Promise<number[]>;

/** Where the script runs: how to run it, and the server's address (for errors). */
export interface ReservationTarget {
  readonly run: ScriptRun;
  readonly address: string;
}

/** The reservation script of `policy`'s algorithm (the limiter refused the others). */
function scriptOf(policy: CompiledPolicy): RedisScript {
  return RESERVATION_SCRIPTS[policy.algorithm]!;
}

export async function reserveOn(target: ReservationTarget, stateKey: string, policy: CompiledPolicy, request: ReserveRequest, now: number | undefined): Promise<ReservedDecision> {
  const values = await target.run(scriptOf(policy), reservationKeys(stateKey, request.id), reservationArgs(policy, OP_RESERVE, request.cost, request.ttlMs, now));
  return decodeReserve(values, stateKey, policy, request, target.address);
}

export async function settleOn(target: ReservationTarget, stateKey: string, policy: CompiledPolicy, request: SettleRequest, now: number | undefined): Promise<Settlement> {
  const values = await target.run(scriptOf(policy), reservationKeys(stateKey, request.id), reservationArgs(policy, OP_SETTLE, request.cost, 0, now));
  return decodeSettle(values, stateKey, policy, target.address);
}

/** The state key and the record key of reservation `id` (the same hash tag). */
export function reservationKeys(stateKey: string, id: string): string[] {
  return [stateKey, `${stateKey}:r:${escapeKeyPart(id)}`];
}

/**
 * The script's arguments: now ('' for Redis TIME), op, cost, ttl, then decide.lua's policy record
 * (a calendar window's boundaries around the call's `now`, or this process's time when Redis's is used).
 */
export function reservationArgs(policy: CompiledPolicy, op: number, cost: number, ttlMs: number, now: number | undefined): (string | number)[] {
  return [now === undefined ? '' : now, op, cost, ttlMs, ...policyFields(policy, now ?? currentTime())];
}

/** The decision of a reserve's reply (a retry of a settled reservation: with its settled cost); a conflicting id or unreadable state is an error. */
export function decodeReserve(values: readonly number[], stateKey: string, policy: CompiledPolicy, request: ReserveRequest, address: string): ReservedDecision {
  checkState(values, stateKey, policy, address);
  if (values[1] === STATUS_CONFLICT) throw conflict(request, values[2]!);
  const settled = values[3]!;
  return values[1] === STATUS_REPLAY && settled >= 0 ? { ...decision(values, policy), settled } : decision(values, policy);
}

/** The settlement of a settle's reply. */
export function decodeSettle(values: readonly number[], stateKey: string, policy: CompiledPolicy, address: string): Settlement {
  checkState(values, stateKey, policy, address);
  const status = SETTLE_STATUSES[values[1]!] ?? 'unknown';
  const settled = values[3]!;
  return { status, reserved: values[2]!, cost: settled < 0 ? 0 : settled, decision: decision(values, policy) };
}

function checkState(values: readonly number[], stateKey: string, policy: CompiledPolicy, address: string): void {
  const reason = values[9];
  if (reason === REASON_CLOCK_OUTSIDE_PERIODS) throw clockOutsidePeriodsError(address, values[0]!, policy);
  if (reason === REASON_WRONG_TYPE || reason === REASON_CORRUPT_STATE) {
    throw new StoreDataError(stateKey, `Redis key ${stateKey} holds ${reason === REASON_WRONG_TYPE ? 'a value of another type' : 'state Tollgate cannot read'}; nothing was reserved or settled — delete the key to start it fresh`);
  }
}

/** The reply's decision: allowed, remaining, reset_at, retry_after, delay, reason, made at. */
function decision(values: readonly number[], policy: CompiledPolicy): Decision {
  const [allowed, remaining, resetAt, retryAfter, delay, reasonCode, now] = values.slice(4, 11) as number[] as [number, number, number, number, number, number, number];
  const reason: DecisionReason | undefined = reasonCode === REASON_COST_EXCEEDS_CAPACITY ? 'cost-exceeds-capacity' : reasonCode === REASON_BLOCKED || reasonCode === REASON_BLOCK_STARTED ? 'blocked' : undefined;
  const base = { allowed: allowed === 1, limit: policy.nominalCapacity, remaining, resetAt, retryAfter, now };
  const shaped = delay >= 0 ? { ...base, delay } : base;
  if (reasonCode === REASON_BLOCK_STARTED) return { ...shaped, reason: 'blocked', blockStarted: true };
  return reason === undefined ? shaped : { ...shaped, reason };
}
