/**
 * Reserve then settle on Redis: the keys, arguments and reply of scripts/reservation.lua. A
 * reservation's record is named after its key's state, `<state key>:r:<id>`, so it carries the same
 * hash tag and lives in the same Cluster slot: one script call reads and writes both atomically.
 */
import type { Decision, DecisionReason } from '../../decision.js';
import { StoreDataError } from '../../errors.js';
import type { CompiledPolicy } from '../../policy.js';
import { conflict } from '../reservations-memory.js';
import type { ReserveRequest, SettleRequest, Settlement, SettlementStatus } from '../types.js';
import { escapeKeyPart } from './keys.js';
import { RESERVATION_SCRIPTS, type RedisScript } from './lua.js';
import { REASON_COST_EXCEEDS_CAPACITY, REASON_CORRUPT_STATE, REASON_WRONG_TYPE, policyFields } from './protocol.js';

export const OP_RESERVE = 1;
export const OP_SETTLE = 2;

const STATUS_CONFLICT = 2;
const SETTLE_STATUSES: Readonly<Record<number, SettlementStatus>> = { 0: 'settled', 1: 'repeated', 3: 'unknown' };

/** Runs `script` on `keys` with `args` (the store's EVALSHA, its failures described). */
export type ScriptRun = (script: RedisScript, keys: string[], args: (string | number)[]) => Promise<number[]>;

/** The reservation script of `policy`'s algorithm (the limiter refused the others). */
function scriptOf(policy: CompiledPolicy): RedisScript {
  return RESERVATION_SCRIPTS[policy.algorithm]!;
}

export async function reserveOn(run: ScriptRun, stateKey: string, policy: CompiledPolicy, request: ReserveRequest, now: number | undefined): Promise<Decision> {
  return decodeReserve(await run(scriptOf(policy), reservationKeys(stateKey, request.id), reservationArgs(policy, OP_RESERVE, request.cost, request.ttlMs, now)), stateKey, policy, request);
}

export async function settleOn(run: ScriptRun, stateKey: string, policy: CompiledPolicy, request: SettleRequest, now: number | undefined): Promise<Settlement> {
  return decodeSettle(await run(scriptOf(policy), reservationKeys(stateKey, request.id), reservationArgs(policy, OP_SETTLE, request.cost, 0, now)), stateKey, policy);
}

/** The state key and the record key of reservation `id` (the same hash tag). */
export function reservationKeys(stateKey: string, id: string): string[] {
  return [stateKey, `${stateKey}:r:${escapeKeyPart(id)}`];
}

/** The script's arguments: now ('' for Redis TIME), the policy record, op, cost, ttl. */
export function reservationArgs(policy: CompiledPolicy, op: number, cost: number, ttlMs: number, now: number | undefined): (string | number)[] {
  // The first 8 fields of decide.lua's record: reservations take no penalty and no calendar window (adjust.ts).
  return [now === undefined ? '' : now, ...policyFields(policy, 0).slice(0, 8), op, cost, ttlMs];
}

/** The decision of a reserve's reply; a conflicting id or unreadable state is an error. */
export function decodeReserve(values: readonly number[], stateKey: string, policy: CompiledPolicy, request: ReserveRequest): Decision {
  checkState(values, stateKey);
  if (values[1] === STATUS_CONFLICT) throw conflict(request, values[2]!);
  return decision(values, policy);
}

/** The settlement of a settle's reply. */
export function decodeSettle(values: readonly number[], stateKey: string, policy: CompiledPolicy): Settlement {
  checkState(values, stateKey);
  const status = SETTLE_STATUSES[values[1]!] ?? 'unknown';
  const settled = values[3]!;
  return { status, reserved: values[2]!, cost: settled < 0 ? 0 : settled, decision: decision(values, policy) };
}

function checkState(values: readonly number[], stateKey: string): void {
  const reason = values[9];
  if (reason === REASON_WRONG_TYPE || reason === REASON_CORRUPT_STATE) {
    throw new StoreDataError(stateKey, `Redis key ${stateKey} holds ${reason === REASON_WRONG_TYPE ? 'a value of another type' : 'state Tollgate cannot read'}; nothing was reserved or settled — delete the key to start it fresh`);
  }
}

/** The reply's decision: allowed, remaining, reset_at, retry_after, delay, reason, made at. */
function decision(values: readonly number[], policy: CompiledPolicy): Decision {
  const [allowed, remaining, resetAt, retryAfter, delay, reasonCode, now] = values.slice(4, 11) as number[] as [number, number, number, number, number, number, number];
  const reason: DecisionReason | undefined = reasonCode === REASON_COST_EXCEEDS_CAPACITY ? 'cost-exceeds-capacity' : undefined;
  const base = { allowed: allowed === 1, limit: policy.nominalCapacity, remaining, resetAt, retryAfter, now };
  const shaped = delay >= 0 ? { ...base, delay } : base;
  return reason === undefined ? shaped : { ...shaped, reason };
}
