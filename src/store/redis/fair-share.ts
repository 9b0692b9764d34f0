/**
 * Fair shares on Redis (docs/semantics.md "Fair shares"): one call of scripts/fair-share.lua per
 * decision, on the group's hash. Its hash tag is derived from the group (`{%fs:<group>}`), never from
 * a tenant's key, so every tenant of a group is decided in one Cluster slot, atomically; an escaped
 * caller's key never starts with `%f` (escapeKeyPart writes `%` as `%25`), so no caller's keys share
 * its name or are reached by resetPrefix.
 */
import type { Decision } from '../../decision.js';
import { SHARE_RANGES, type CompiledPolicy } from '../../policy.js';
import { compactWindow } from '../../units.js';
import { escapeKeyPart } from './keys.js';
import { FAIR_SHARE_SCRIPT } from './lua.js';
import { REASON_COST_EXCEEDS_CAPACITY, REASON_CORRUPT_STATE, REASON_WRONG_TYPE } from './protocol.js';
import type { ScriptRun } from './reservations.js';
import { dataError } from './script-call.js';

export const SHARE_CONSUME = 1;
export const SHARE_PEEK = 2;
export const SHARE_RESET = 3;

/** The Redis key of `policy`'s group: `<prefix>{%fs:<group>}<window>`. */
export function shareGroupKey(keyPrefix: string, policy: CompiledPolicy): string {
  return `${keyPrefix}{%fs:${escapeKeyPart(policy.share!.group)}}${compactWindow(policy.windowMs)}`;
}

/** Decides (or peeks, or forgets) tenant `key` of `policy`'s group in one script call. */
export async function decideShareOn(run: ScriptRun, keyPrefix: string, key: string, policy: CompiledPolicy, cost: number, op: number, now: number | undefined): Promise<Decision> {
  const groupKey = shareGroupKey(keyPrefix, policy);
  const args = [now === undefined ? '' : now, policy.windowMs, policy.limit, policy.share!.weight, cost, op, key, SHARE_RANGES.tenants];
  const [at, allowed, remaining, resetAt, retryAfter, reason] = (await run(FAIR_SHARE_SCRIPT, [groupKey], args)) as [number, number, number, number, number, number];
  if (reason === REASON_WRONG_TYPE || reason === REASON_CORRUPT_STATE) throw dataError(groupKey, reason);
  const decision = { allowed: allowed === 1, limit: policy.nominalCapacity, remaining, resetAt, retryAfter, now: at };
  return reason === REASON_COST_EXCEEDS_CAPACITY ? { ...decision, reason: 'cost-exceeds-capacity' } : decision;
}
