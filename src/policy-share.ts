/**
 * `share: { group, weight }` of a policy (fair shares, docs/semantics.md "Fair shares"): its shape,
 * bounds and validation, beside policy.ts (which compiles it into CompiledPolicy.share). The
 * decisions are in algorithms/fair-share.ts.
 */
import { InvalidPolicyError, describeValue } from './errors.js';
import { wellFormedKey } from './keys.js';

/** A policy's share: which group its key's tenant belongs to, and the tenant's weight. */
export interface ShareSpec {
  readonly group: string;
  readonly weight: number;
}

/** The bounds of `share` (docs/rules.md, docs/semantics.md). */
export const SHARE_RANGES = Object.freeze({
  /** A whole number: shares are exact integer arithmetic. */
  weight: { min: 1, max: 1_000 },
  /** Bytes of UTF-8 in a group's name. */
  groupBytes: 256,
  /** Active tenants one group holds at most: a decision reads them all (O(tenants)). */
  tenants: 256,
  /** L × weight must stay below 2^53: L ≤ ⌊(2^53 − 1) / 1000⌋. */
  limit: Math.floor(Number.MAX_SAFE_INTEGER / 1_000),
});

/** Validates `share` of `policy` (its `limit` already checked); undefined when absent. */
export function checkShare(share: unknown, policy: Readonly<Record<string, unknown>>, limit: number): ShareSpec | undefined {
  if (share === undefined) return undefined;
  if (typeof share !== 'object' || share === null || Array.isArray(share)) {
    throw new InvalidPolicyError('share', `share must be an object like { group: 'api', weight: 1 }, got ${describeValue(share)}`);
  }
  const { group, weight, ...rest } = share as Record<string, unknown>;
  const extra = Object.keys(rest)[0];
  if (extra !== undefined) throw new InvalidPolicyError('share', `unknown field share.${extra}; share has group and weight`);
  if (typeof group !== 'string' || group.length === 0 || Buffer.byteLength(group, 'utf8') > SHARE_RANGES.groupBytes || wellFormedKey(group) !== group) {
    throw new InvalidPolicyError('share', `share.group must be a non-empty string of at most ${SHARE_RANGES.groupBytes} bytes naming the tenants' group, got ${describeValue(group)}`);
  }
  const { min, max } = SHARE_RANGES.weight;
  if (typeof weight !== 'number' || !Number.isInteger(weight) || weight < min || weight > max) {
    throw new InvalidPolicyError('share', `share.weight must be a whole number from ${min} to ${max}, got ${describeValue(weight)}`);
  }
  checkSharedPolicy(policy, limit);
  return Object.freeze({ group, weight });
}

/** Throws unless the policy is one fair shares decide: an aligned fixed window of a fixed length, nothing else. */
function checkSharedPolicy(policy: Readonly<Record<string, unknown>>, limit: number): void {
  if (policy.algorithm !== 'fixed-window') {
    throw new InvalidPolicyError('share', `share applies to fixed-window only, not ${String(policy.algorithm)}; use algorithm: 'fixed-window' for a shared capacity`);
  }
  for (const field of ['softPercent', 'countRejected', 'windowStart', 'timeZone', 'blockDuration'] as const) {
    if (policy[field] !== undefined && policy[field] !== 0 && policy[field] !== false && policy[field] !== 'aligned') {
      throw new InvalidPolicyError('share', `share does not combine with ${field}: a shared capacity is an aligned fixed window of limit per window; remove ${field}`);
    }
  }
  if (typeof policy.window === 'string' && /^[a-z]+$/.test(policy.window)) {
    throw new InvalidPolicyError('share', `share needs a window of a fixed length (e.g. '1m'), not the calendar period '${policy.window}'`);
  }
  if (limit > SHARE_RANGES.limit) {
    throw new InvalidPolicyError('limit', `limit ${limit} is above ${SHARE_RANGES.limit}, the largest a shared capacity counts exactly (limit × weight < 2^53); lower the limit`);
  }
}

