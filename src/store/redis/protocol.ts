/**
 * The wire format between the Redis store and decide.lua: each distinct policy once per batch,
 * then (policy, op, cost) per request; back: the decision time, then 6 integers per decision. Field order and codes must match the header of scripts/decide.lua.
 */
import { algorithmTable } from '../../algorithms/catalog.js';
import type { Decision, DecisionReason } from '../../decision.js';
import { StoreError } from '../../errors.js';
import type { CompiledPolicy } from '../../policy.js';
import type { WindowCounts } from '../types.js';

export const OP_CONSUME = 1;
export const OP_PEEK = 2;
export const OP_RESET = 3;
/** Local-first sync: add to a window counter, answer its counts (decide.lua's add_to_window). */
export const OP_ADD = 4;

export const ALGORITHM_CODES = algorithmTable('code');

/**
 * With an explicit `now`, keys live in real time (their lifetime at `now`) + (how far `now` lags
 * Redis TIME, at most this) + {@link REPLAY_SLACK_MS}, so replays slower than real time keep their
 * state (decide.lua's MAX_REPLAY_LAG and REPLAY_SLACK).
 */
export const REPLAY_MAX_LAG_MS = 3_600_000;
export const REPLAY_SLACK_MS = 1_000;
/**
 * redisStore `clock: 'caller'`: a lone decision's key lives (its lifetime at the caller's `now`) +
 * this, counted by Redis from the write (single.lua CALLER_CLOCK_SLACK), so nodes whose clocks
 * differ by up to this much all find it until their own clock passes its end.
 */
export const CALLER_CLOCK_SLACK_MS = 1_000;
/** A lean script's arguments (single.lua): policy, op and cost on Redis TIME, the caller's `now` as a 4th. */
export const SINGLE_ARGS_ON_REDIS_TIME = 3;
export const SINGLE_ARGS_ON_CALLER_CLOCK = 4;

/** Where the first decision starts in the script's reply (after the decision time). */
export const RESULT_START = 1;
/** Integers returned per decision. */
export const RESULT_WIDTH = 6;
export const REASON_COST_EXCEEDS_CAPACITY = 1;
/** The key serves a penalty (scripts/penalty.lua). */
export const REASON_BLOCKED = 2;
/** The denial that started the key's penalty: reason `blocked`, and `blockStarted`. */
export const REASON_BLOCK_STARTED = 3;
export const REASON_WRONG_TYPE = 10;
export const REASON_CORRUPT_STATE = 11;
/** A calendar window: Redis TIME fell outside the period boundaries sent (scripts/fixed-window.lua). */
export const REASON_CLOCK_OUTSIDE_PERIODS = 12;
/** No reason: admitted, or denied for lack of quota. */
export const REASON_NONE = 0;

/**
 * The 9 script fields of a policy record (see decide.lua), and a calendar window's 3 period
 * boundaries around `clock` (the call's `now`, or this process's time when Redis's is used).
 */
export function policyFields(policy: CompiledPolicy, clock: number): number[] {
  if (policy.calendar !== undefined) return [...policyRecord(policy), ...policy.calendar.boundariesAround(clock)];
  return policyRecord(policy);
}

function policyRecord(policy: CompiledPolicy): number[] {
  return [
    ALGORITHM_CODES[policy.algorithm],
    policy.windowMs,
    policy.limit,
    policy.capacity,
    policy.nominalCapacity,
    policy.countRejected ? 1 : 0,
    policy.calendar !== undefined ? 2 : policy.firstHit ? 1 : 0,
    policy.precision,
    policy.blockMs,
  ];
}

/**
 * Whether a lean script (scripts/single.lua) can decide `policy`: not a sliding log, nor a sliding
 * window of N > 1 buckets, nor a policy with a penalty (penalty.lua is the batch script's), nor a
 * calendar window (its period boundaries ride in decide.lua's policy record).
 */
export function hasLeanScript(policy: CompiledPolicy): boolean {
  return policy.algorithm !== 'sliding-log' && policy.precision === 1 && policy.blockMs === 0 && policy.calendar === undefined;
}

/** Each policy's first lean-script argument, made once: the script parses a policy's text once too. */
const singlePolicyTexts = new WeakMap<CompiledPolicy, string>();

/**
 * The arguments of a lean script (scripts/single.lua): the policy's window, limit, capacity,
 * nominal capacity and flags (count_rejected 1 + first_hit 2) as one text, the op and the cost;
 * then, on the caller's clock, `now`.
 */
export function singleDecisionArgs(policy: CompiledPolicy, op: number, cost: number, now?: number): (string | number)[] {
  let text = singlePolicyTexts.get(policy);
  if (text === undefined) {
    const flags = (policy.countRejected ? 1 : 0) + (policy.firstHit ? 2 : 0);
    text = `${policy.windowMs} ${policy.limit} ${policy.capacity} ${policy.nominalCapacity} ${flags}`;
    singlePolicyTexts.set(policy, text);
  }
  return now === undefined ? [text, op, cost] : [text, op, cost, now];
}

/** Builds the decision from the script's integers at `offset`; reasons ≥ 10 are the caller's to raise. */
export function decodeDecision(values: readonly number[], offset: number, policy: CompiledPolicy): Decision {
  const now = values[0]!;
  const allowed = values[offset] === 1;
  const remaining = values[offset + 1]!;
  const resetAt = values[offset + 2]!;
  const retryAfter = values[offset + 3]!;
  const delay = values[offset + 4]!;
  const reasonCode = values[offset + 5]!;
  const limit = policy.nominalCapacity;
  let reason: DecisionReason | undefined;
  if (reasonCode === REASON_COST_EXCEEDS_CAPACITY) reason = 'cost-exceeds-capacity';
  if (reasonCode === REASON_BLOCKED) reason = 'blocked';
  // A block's first denial (penalty.lua): denied, no delay.
  if (reasonCode === REASON_BLOCK_STARTED) return { allowed, limit, remaining, resetAt, retryAfter, now, reason: 'blocked', blockStarted: true };
  if (delay >= 0) {
    return reason === undefined
      ? { allowed, limit, remaining, resetAt, retryAfter, now, delay }
      : { allowed, limit, remaining, resetAt, retryAfter, now, reason, delay };
  }
  return reason === undefined ? { allowed, limit, remaining, resetAt, retryAfter, now } : { allowed, limit, remaining, resetAt, retryAfter, now, reason };
}

/**
 * The counts an add answers at `offset` (1, count, mark, previous, -1, reason), in the algorithm's
 * state layout: an aligned window's mark is its index, a first-hit window's its start.
 */
export function decodeWindowCounts(values: readonly number[], offset: number, policy: CompiledPolicy): WindowCounts {
  const count = values[offset + 1]!;
  const mark = values[offset + 2]!;
  const start = policy.firstHit ? mark : mark * policy.windowMs;
  const state = policy.algorithm === 'sliding-window' ? [count, start, values[offset + 3]!] : [count, start];
  return { now: values[0]!, state };
}

/**
 * Redis TIME fell outside the calendar periods [b0, b2) sent around this process's clock: the
 * clocks disagree by half a period or more, so the script decided nothing rather than count in a
 * period this node did not name.
 */
export function clockOutsidePeriodsError(address: string, redisNow: number, policy: CompiledPolicy): StoreError {
  const { unit, timeZone } = policy.calendar!;
  return new StoreError(
    `Redis at ${address} reads the time ${new Date(redisNow).toISOString()}, half a ${unit} or more from this node's ${new Date(Date.now()).toISOString()}: a calendar window ('${unit}' in ${timeZone}) cannot tell which period to count in; synchronise the clocks (NTP)`,
  );
}
