/**
 * Concurrency limits of rules: a descriptor carrying `concurrency: { limit, ttl }` holds at most
 * `limit` requests in flight whose descriptor reaches it (envoy's matching, match.ts, the counter
 * key as for its rate limit). `acquireCheck` takes one slot per such descriptor under one permit
 * id, all or nothing: when one is refused, the slots taken for the others are released at once (so
 * the request never holds a part of its slots; meanwhile they counted, which can refuse another
 * request, never admit one past a limit). `releaseCheck` frees them from any process. Descriptors
 * without a concurrency limit take no slot and never refuse. Rate limits are decided apart
 * (`check`): a caller that wants both calls both.
 */
import { randomBytes } from 'node:crypto';
import { checkPermitId, type DegradedReason, type LimiterCore, type Permit } from '../limiter/index.js';
import { validateCheckRequest, type CheckRequest } from './check.js';
import { walkDescriptor } from './match.js';
import type { RuleSet } from './ruleset.js';

/** One descriptor's slot, as the acquire answered it. */
export interface SlotStatus {
  readonly allowed: boolean;
  readonly limit: number;
  readonly held: number;
  readonly retryAfter: number;
  /** The descriptor's path in the rules (`domain.key=value.key`). */
  readonly rule: string;
  /** The key its slots are held under (the descriptor's counter key, as a check's status `key`). */
  readonly key: string;
  readonly reason?: DegradedReason;
}

/** The answer to {@link acquireCheck}. */
export interface SlotCheckResult {
  /** Whether every descriptor with a concurrency limit got its slot. */
  readonly allowed: boolean;
  /** The permit id to release with (also when refused: nothing is held under it then). */
  readonly id: string;
  /** Per descriptor, in the request's order: its slot, or null when it has no concurrency limit. */
  readonly statuses: readonly (SlotStatus | null)[];
  /** When refused: ms until a slot of a refusing descriptor expires at the latest. */
  readonly retryAfter: number;
}

/** What a request's descriptors hold slots under. */
interface Planned {
  readonly index: number;
  readonly key: string;
  readonly limit: number;
  readonly ttlMs: number;
  readonly rule: string;
}

function plan(rules: RuleSet, request: Pick<CheckRequest, 'domain' | 'descriptors'>): Planned[] {
  validateCheckRequest({ domain: request.domain, descriptors: request.descriptors });
  const root = rules.domain(request.domain);
  if (root === undefined) return [];
  const planned: Planned[] = [];
  request.descriptors.forEach((descriptor, index) => {
    const reached = walkDescriptor(root, request.domain, descriptor.entries);
    const slots = reached?.node.slots;
    if (reached !== undefined && slots !== undefined) planned.push({ index, key: reached.counterKey, limit: slots.limit, ttlMs: slots.ttlMs, rule: slots.path });
  });
  return planned;
}

/** Takes a slot for each descriptor of `request` that carries a concurrency limit, all or nothing. */
export async function acquireCheck(limiter: LimiterCore, rules: RuleSet, request: Pick<CheckRequest, 'domain' | 'descriptors'>, id?: string): Promise<SlotCheckResult> {
  const permitId = id === undefined ? randomBytes(16).toString('base64url') : checkPermitId(id);
  const planned = plan(rules, request);
  const permits = await Promise.all(planned.map((p) => limiter.acquire(p.key, { limit: p.limit, ttl: p.ttlMs, id: permitId })));
  const allowed = permits.every((permit) => permit.allowed);
  if (!allowed) await Promise.all(permits.filter((permit) => permit.allowed).map((permit) => permit.release()));
  const statuses: (SlotStatus | null)[] = request.descriptors.map(() => null);
  planned.forEach((p, i) => (statuses[p.index] = slotStatus(p, permits[i]!)));
  const retryAfter = Math.max(0, ...permits.filter((permit) => !permit.allowed).map((permit) => permit.retryAfter));
  return { allowed, id: permitId, statuses, retryAfter };
}

/** Frees the slots `id` holds for the descriptors of `request`; resolves to how many were held. */
export async function releaseCheck(limiter: LimiterCore, rules: RuleSet, request: Pick<CheckRequest, 'domain' | 'descriptors'>, id: string): Promise<number> {
  const permitId = checkPermitId(id);
  const released = await Promise.all(plan(rules, request).map((p) => limiter.release(p.key, permitId)));
  return released.filter(Boolean).length;
}

function slotStatus(p: Planned, permit: Permit): SlotStatus {
  const { allowed, limit, held, retryAfter, reason } = permit;
  return reason === undefined ? { allowed, limit, held, retryAfter, rule: p.rule, key: p.key } : { allowed, limit, held, retryAfter, rule: p.rule, key: p.key, reason };
}
