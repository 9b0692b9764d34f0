/**
 * Reserve then settle through rules (docs/rules.md "Reserve then settle"): `reserveCheck` reserves
 * the estimate on every limit the request's descriptors match, all or nothing — when one enforced
 * limit refuses, the reservations the call made on the others are given back at once (a settle of
 * cost 0, as the rules' concurrency slots release theirs: meanwhile they counted, which can refuse
 * another request, never admit one past a limit). A retry under an id a limit holds settled (given
 * back, or settled by the caller) is refused, spending nothing: the id is spent, a new one is
 * needed. `settleCheck` applies the actual cost to every
 * limit reserved under the id. Each limit counts `cost × the rule's cost`, under the same counter
 * key as `check`; a limit in shadow mode is reserved but never refuses; quota mode is not applied
 * (every other limit is enforced).
 */
import type { Decision } from '../decision.js';
import { InvalidCheckError, describeValue } from '../errors.js';
import { checkReservable, checkReserveOptions, checkSettleOptions, type LimiterCore, type ReservedDecision, type SettlementStatus } from '../limiter/index.js';
import { failureModeOf, matchedStatus, mostSevere, planCheck, type CheckPlan, type Planned } from './check-decide.js';
import { validateCheckRequest, type CheckResult, type DescriptorStatus, type RateLimitDescriptor } from './check.js';
import { listAnswer } from './list-answer.js';
import type { RuleSet } from './ruleset.js';

/** A reserve through rules: the estimate `cost` on every limit the descriptors match, under `id`. */
export interface ReserveCheckRequest {
  readonly domain: string;
  readonly descriptors: readonly RateLimitDescriptor[];
  /** The estimate, a whole number ≥ 1 (each limit counts it times its rule's cost). */
  readonly cost: number;
  /** The reservation's id (1 to 256 characters), the same on every limit: a retry of an admitted reserve counts once. */
  readonly id: string;
  /** ms it waits for its settle (default 60,000, at most 86,400,000). */
  readonly ttl?: number;
  /** Decision time in epoch ms (tests, replays). */
  readonly now?: number;
}

/** A settle through rules: the actual `cost` on every limit the descriptors match, for reservation `id`. */
export interface SettleCheckRequest {
  readonly domain: string;
  readonly descriptors: readonly RateLimitDescriptor[];
  readonly id: string;
  /** What the request actually took, a whole number ≥ 0 (each limit counts it times its rule's cost). */
  readonly cost: number;
  readonly now?: number;
}

/** A reserve's answer: a check's (overall code, one status per descriptor), and the id. */
export interface ReserveCheckResult extends CheckResult {
  readonly id: string;
  /**
   * Present when the id is spent: a limit holds its reservation under this id settled already (given
   * back by a refused call, or settled by the caller). The call is refused (`OVER_LIMIT`) and spends
   * nothing; the message says to reserve again with a new id.
   */
  readonly spentId?: string;
}

/** What a settle did to one descriptor's limit (units of that limit). */
export interface SettledStatus {
  readonly status: SettlementStatus;
  readonly reserved: number;
  readonly cost: number;
  /** What is left of the limit after the settle. */
  readonly limitRemaining: number;
  readonly rule: string;
  readonly key: string;
}

/** A settle's answer: per descriptor, in the request's order, its limit's settlement, or null (no limit, or unlimited). */
export interface SettleCheckResult {
  readonly statuses: readonly (SettledStatus | null)[];
  readonly now: number;
}

const RESERVE_FIELDS = ['domain', 'descriptors', 'cost', 'id', 'ttl', 'now'];
const SETTLE_FIELDS = ['domain', 'descriptors', 'id', 'cost', 'now'];

/** Throws (a typed error naming the fix) unless `request` is a well-formed reserve or settle through rules. */
export function validateReservationRequest(request: ReserveCheckRequest | SettleCheckRequest, where: 'reserveCheck' | 'settleCheck'): void {
  const fields = where === 'reserveCheck' ? RESERVE_FIELDS : SETTLE_FIELDS;
  if (typeof request !== 'object' || request === null) throw new InvalidCheckError(`${where} takes { ${fields.join(', ')} }, got ${describeValue(request)}`);
  const unknown = Object.keys(request).find((name) => !fields.includes(name));
  if (unknown !== undefined) throw new InvalidCheckError(`${where}: unknown field ${JSON.stringify(unknown)}; the fields are ${fields.join(', ')}`);
  validateCheckRequest({ domain: request.domain, descriptors: request.descriptors });
  request.descriptors.forEach((descriptor, i) => {
    if (descriptor.hitsAddend !== undefined) throw new InvalidCheckError(`${where}: descriptors[${i}].hitsAddend is not taken: cost is the request's estimate (or actual cost) on every limit`);
  });
  const { cost, id, now } = request;
  if (where === 'reserveCheck') checkReserveOptions({ cost, id, ...('ttl' in request && request.ttl !== undefined ? { ttl: request.ttl } : {}), ...(now === undefined ? {} : { now }) });
  else checkSettleOptions({ cost, id, ...(now === undefined ? {} : { now }) });
}

/** The request's limits to reserve or settle; throws (before any store call) on bad input or a rule that takes no reservations. */
function planOf(rules: RuleSet, request: ReserveCheckRequest | SettleCheckRequest, where: 'reserveCheck' | 'settleCheck'): CheckPlan | undefined {
  validateReservationRequest(request, where);
  const root = rules.domain(request.domain);
  if (root === undefined) return undefined;
  const plan = planCheck(root, { domain: request.domain, descriptors: request.descriptors }, {});
  for (const p of plan.planned) checkReservable(p.rule.policy, `${where}: the limit of ${p.rule.path}`);
  return plan;
}

/** The units `p`'s limit counts for `cost` (checked); throws when the product leaves the safe integers. */
function unitsOf(p: Planned, cost: number): number {
  const units = cost * p.rule.cost;
  if (!Number.isSafeInteger(units)) throw new InvalidCheckError(`cost ${cost} times the cost ${p.rule.cost} of ${p.rule.path} is past 2^53 - 1: send a smaller cost`);
  return units;
}

/** Reserves `request.cost` on every limit its descriptors match, all or nothing. */
export async function reserveCheck(limiter: LimiterCore, rules: RuleSet, request: ReserveCheckRequest, clock: () => number): Promise<ReserveCheckResult> {
  const plan = planOf(rules, request, 'reserveCheck');
  const { id, ttl, now } = request;
  const call = { id, ...(ttl === undefined ? {} : { ttl }), ...(now === undefined ? {} : { now }) };
  const root = rules.domain(request.domain);
  const listed = root?.lists === undefined ? undefined : listAnswer(root.lists, { domain: request.domain, descriptors: request.descriptors, ...(now === undefined ? {} : { now }) }, clock, {});
  if (listed !== undefined) return { ...listed, id };
  if (plan === undefined) return { overallCode: 'OK', statuses: request.descriptors.map(() => NO_LIMIT), now: now ?? clock(), id };
  const planned = plan.planned;
  const decisions = await Promise.all(planned.map((p) => limiter.reserve(p.counterKey, p.rule.policy, { ...call, cost: unitsOf(p, request.cost), ...failureModeOf(p) })));
  // A retry of an id a refused call gave back (or its caller settled): a limit replays a settled
  // reservation, which holds nothing now, so the call is refused as the first was, never admitted.
  const spent = decisions.some((decision) => decision.settled !== undefined);
  const denied = spent || planned.some((p, i) => !p.shadow && !decisions[i]!.allowed);
  // Refused: what the call reserved on the other limits goes back, and their statuses say what remains.
  const after = denied ? await giveBack(limiter, planned, decisions, id, now) : decisions;
  planned.forEach((p, i) => (plan.statuses[p.index] = matchedStatus(p, after[i]!, p.shadow, false)));
  const degraded = mostSevere(decisions);
  return {
    overallCode: denied ? 'OVER_LIMIT' : 'OK',
    statuses: plan.statuses,
    now: decisions[0]?.now ?? now ?? clock(),
    id,
    ...(spent ? { spentId: spentMessage(id) } : {}),
    ...(degraded !== undefined ? { degraded } : {}),
  };
}

function spentMessage(id: string): string {
  return `id ${JSON.stringify(id)} was given back by a refused reserve, or settled: a retry with it is refused and spends nothing; reserve with a new id`;
}

/** Settles each admitted reservation of a refused call at 0; a give-back the store could not take leaves that estimate standing (its ttl). */
async function giveBack(limiter: LimiterCore, planned: readonly Planned[], decisions: readonly ReservedDecision[], id: string, now: number | undefined): Promise<Decision[]> {
  const given = await Promise.allSettled(
    planned.map((p, i) => (decisions[i]!.allowed ? limiter.settle(p.counterKey, p.rule.policy, { id, cost: 0, ...(now === undefined ? {} : { now }) }) : undefined)),
  );
  return decisions.map((decision, i) => {
    const settled = given[i]!;
    return decision.allowed && settled.status === 'fulfilled' && settled.value !== undefined ? settled.value.decision : decision;
  });
}

/** Settles reservation `request.id` with the actual cost on every limit its descriptors match. */
export async function settleCheck(limiter: LimiterCore, rules: RuleSet, request: SettleCheckRequest, clock: () => number): Promise<SettleCheckResult> {
  const plan = planOf(rules, request, 'settleCheck');
  const { id, now } = request;
  const call = { id, ...(now === undefined ? {} : { now }) };
  const statuses: (SettledStatus | null)[] = request.descriptors.map(() => null);
  if (plan === undefined) return { statuses, now: now ?? clock() };
  const settlements = await Promise.all(plan.planned.map((p) => limiter.settle(p.counterKey, p.rule.policy, { ...call, cost: unitsOf(p, request.cost) })));
  plan.planned.forEach((p, i) => {
    const { status, reserved, cost, decision } = settlements[i]!;
    statuses[p.index] = { status, reserved, cost, limitRemaining: decision.remaining, rule: p.rule.path, key: p.counterKey };
  });
  return { statuses, now: settlements[0]?.decision.now ?? now ?? clock() };
}

const NO_LIMIT: DescriptorStatus = Object.freeze({ code: 'OK', limitRemaining: 0, durationUntilReset: 0 });
