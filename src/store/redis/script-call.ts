/**
 * What the Redis store sends for a batch of decisions: the lean script for a lone decision on Redis
 * TIME, else the batch script (decide.lua) with each distinct policy's record sent once.
 */
import type { AlgorithmName } from '../../algorithms/catalog.js';
import { currentTime } from '../../clock.js';
import { StoreDataError } from '../../errors.js';
import type { CompiledPolicy } from '../../policy.js';
import { DECIDE_SCRIPT, SINGLE_SCRIPTS, type RedisScript } from './lua.js';
import {
  OP_ADD,
  OP_CONSUME,
  OP_PEEK,
  REASON_CLOCK_OUTSIDE_PERIODS,
  REASON_CORRUPT_STATE,
  REASON_WRONG_TYPE,
  RESULT_START,
  RESULT_WIDTH,
  clockOutsidePeriodsError,
  decodeDecision,
  decodeWindowCounts,
  hasLeanScript,
  policyFields,
  singleDecisionArgs,
} from './protocol.js';

/** One group of requests (all-or-nothing) waiting for its batch; a single decision is a group of one. */
export interface Pending {
  readonly keys: string[];
  readonly policies: CompiledPolicy[];
  readonly op: number;
  readonly costs: number[];
  /** Decisions, or an add's {@link WindowCounts}. */
  readonly resolve: (results: unknown[]) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * The script, keys and arguments deciding `batch`: a lone consume or peek on the store's own time
 * takes its algorithm's lean script (7 arguments, 8 with the caller's clock; its algorithm is
 * returned too, for FCALL); anything else the batch script, where each distinct policy is sent once
 * and requests refer to it by index. `callerClock` (redisStore `clock: 'caller'`): the store's own
 * time is this process's clock, sent as `now`, instead of Redis TIME. `lean` false: the batch
 * script whatever the batch (a cross-slot call, cross-slot.ts).
 */
export function scriptCall(timeKey: string, batch: Pending[], callerClock = false, lean = true): [RedisScript, string[], (string | number)[], AlgorithmName?] {
  const first = batch[0]!;
  const single = lean && batch.length === 1 && first.keys.length === 1 && timeKey === '' && (first.op === OP_CONSUME || first.op === OP_PEEK);
  const leanScript = single && hasLeanScript(first.policies[0]!) ? SINGLE_SCRIPTS[first.policies[0]!.algorithm] : undefined;
  if (leanScript !== undefined) {
    const args = singleDecisionArgs(first.policies[0]!, first.op, first.costs[0]!, callerClock ? currentTime() : undefined);
    return [leanScript, first.keys, args, first.policies[0]!.algorithm];
  }
  if (callerClock && timeKey === '') timeKey = String(currentTime());
  const policyIndexes = new Map<CompiledPolicy, number>();
  const policyArgs: number[] = [];
  const keys: string[] = [];
  const requestArgs: number[] = [batch.length];
  // The clock a calendar window's period boundaries are chosen around (protocol.ts policyFields).
  const clock = timeKey === '' ? currentTime() : Number(timeKey);
  for (const pending of batch) {
    requestArgs.push(pending.keys.length);
    for (let i = 0; i < pending.keys.length; i++) {
      const policy = pending.policies[i]!;
      let policyIndex = policyIndexes.get(policy);
      if (policyIndex === undefined) {
        policyIndex = policyIndexes.size + 1;
        policyIndexes.set(policy, policyIndex);
        policyArgs.push(...policyFields(policy, clock));
      }
      keys.push(pending.keys[i]!);
      requestArgs.push(policyIndex, pending.op, pending.costs[i]!);
    }
  }
  return [DECIDE_SCRIPT, keys, [timeKey, policyIndexes.size, ...policyArgs, ...requestArgs]];
}

/** The script's answer for `batch` (from Redis at `address`), handed to each caller. */
export function deliver(batch: Pending[], values: number[], address: string): void {
  let offset = RESULT_START;
  for (const pending of batch) {
    const decisions: unknown[] = [];
    let problem: Error | undefined;
    for (let i = 0; i < pending.keys.length; i++, offset += RESULT_WIDTH) {
      const reason = values[offset + 5];
      if (reason === REASON_WRONG_TYPE || reason === REASON_CORRUPT_STATE) {
        problem ??= dataError(pending.keys[i]!, reason);
      } else if (reason === REASON_CLOCK_OUTSIDE_PERIODS) {
        problem ??= clockOutsidePeriodsError(address, values[0]!, pending.policies[i]!);
      } else {
        const policy = pending.policies[i]!;
        decisions.push(pending.op === OP_ADD ? decodeWindowCounts(values, offset, policy) : decodeDecision(values, offset, policy));
      }
    }
    // Errors are per group: one bad key does not fail the other decisions of the batch.
    if (problem !== undefined) pending.reject(problem);
    else pending.resolve(decisions);
  }
}

export function dataError(key: string, reason: number): StoreDataError {
  return new StoreDataError(
    key,
    reason === REASON_WRONG_TYPE
      ? `Redis key ${key} holds a value of another type (another application's key?); Tollgate leaves it alone — use another keyPrefix or delete the key`
      : `Redis key ${key} holds state Tollgate cannot read; it was left unchanged — delete the key to start it fresh`,
  );
}
