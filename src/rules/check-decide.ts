/**
 * Deciding a check once its descriptors are matched: which limits apply (replaces, unlimited,
 * overrides), what each costs (a descriptor's explicit `hitsAddend: 0` only checks), and the
 * decisions — all-or-nothing for the enforced limits, quota-mode limits denying only when all of
 * them are over, shadow-mode limits never denying — then one status per descriptor.
 */
import type { Decision } from '../decision.js';
import { DEGRADED_REASON, degradedReasonOf, type DecideMode, type DegradedReason, type FailureMode, type LimitAllOptions, type LimiterCore, type LimitRequest } from '../limiter/index.js';
import { compilePolicy } from '../policy.js';
import type { MaybePromise } from '../store/types.js';
import { ruleWindowMs } from '../units.js';
import type { CheckOptions, CheckRequest, CheckResult, CurrentLimit, DescriptorStatus, LimitOverride } from './check-types.js';
import { UNLIMITED_REMAINING } from './check-types.js';
import { matchDescriptor, overrideCounterKey, type Match } from './match.js';
import type { CompiledRule, RuleNode } from './ruleset.js';
import { shapedRule } from './shaping.js';

/** A limit that applies to one descriptor of the request. */
export interface Planned {
  readonly index: number;
  readonly rule: CompiledRule;
  readonly counterKey: string;
  /** Units this request takes; 0 checks without counting. */
  readonly cost: number;
  readonly quota: boolean;
  readonly shadow: boolean;
}

/** The limits to decide, and the statuses already known (no limit, unlimited). */
export interface CheckPlan {
  readonly statuses: DescriptorStatus[];
  readonly planned: readonly Planned[];
}

const NO_LIMIT: DescriptorStatus = Object.freeze({ code: 'OK', limitRemaining: 0, durationUntilReset: 0 });

/** The matches of the check being planned (planCheck runs synchronously: one list serves every check). */
const matching: (Match | undefined)[] = [];

/** Matches every descriptor and drops replaced limits; unlimited ones are answered here. */
export function planCheck(root: RuleNode, request: CheckRequest, options: CheckOptions): CheckPlan {
  const { descriptors } = request;
  const statuses: DescriptorStatus[] = [];
  const matches = matching;
  matches.length = 0;
  let replacing = false;
  for (const descriptor of descriptors) {
    const match = descriptor.limit !== undefined ? { rule: overrideRule(descriptor.limit), counterKey: overrideCounterKey(request.domain, descriptor.entries, descriptor.limit.unit) } : matchDescriptor(root, request.domain, descriptor.entries);
    if (match !== undefined && match.rule.replaces.length > 0) replacing = true;
    matches.push(match);
    statuses.push(NO_LIMIT);
  }
  // Most checks replace nothing: no set to build.
  const replaced = replacing ? replacedNames(matches) : undefined;
  const planned: Planned[] = [];
  for (let index = 0; index < matches.length; index++) {
    const match = matches[index];
    if (match === undefined) continue;
    const rule = options.maxDelayMs === undefined ? match.rule : shapedRule(match.rule, options.maxDelayMs);
    if (rule.unlimited) {
      // As envoy: the largest uint32 remaining, so callers can tell it from "no limit".
      statuses[index] = { code: 'OK', limitRemaining: UNLIMITED_REMAINING, durationUntilReset: 0, rule: rule.path };
      continue;
    }
    if (replaced !== undefined && rule.name !== undefined && replaced.has(rule.name)) continue;
    const descriptor = descriptors[index]!;
    // envoy's GetHitsAddends: a descriptor's own hits_addend, even 0; else the request's, at least 1.
    const hits = descriptor.hitsAddend ?? (request.hits || 1);
    planned.push({ index, rule, counterKey: match.counterKey, cost: hits * rule.cost, quota: rule.quotaMode || options.quotaMode === true, shadow: rule.shadowMode });
  }
  matches.length = 0;
  return { statuses, planned };
}

/** The names of the limits the matched rules replace. */
function replacedNames(matches: readonly (Match | undefined)[]): Set<string> {
  const replaced = new Set<string>();
  for (const match of matches) for (const name of match?.rule.replaces ?? []) replaced.add(name);
  return replaced;
}

/**
 * Decides the planned limits and builds the result: synchronously when the store answers so (the
 * memory store), so a check on it costs no promise.
 */
export function decideMatched(limiter: LimiterCore, plan: CheckPlan, request: CheckRequest, clock: () => number, options: CheckOptions): MaybePromise<CheckResult> {
  const decisions = decidePlanned(limiter, plan.planned, callOptions(plan, request, options), options.spend !== false);
  if (decisions instanceof Promise) return decisions.then((decided) => checkResult(plan, decided, request, clock, options));
  return checkResult(plan, decisions, request, clock, options);
}

/** The check's answer from one decision per planned limit. */
function checkResult(plan: CheckPlan, decisions: readonly Decision[], request: CheckRequest, clock: () => number, options: CheckOptions): CheckResult {
  const { planned, statuses } = plan;
  let regularOver = false;
  let quotaLimits = 0;
  let quotaOver = 0;
  for (let i = 0; i < planned.length; i++) {
    const p = planned[i]!;
    if (p.shadow) continue;
    const over = !decisions[i]!.allowed;
    if (!p.quota) regularOver ||= over;
    else {
      quotaLimits += 1;
      if (over) quotaOver += 1;
    }
  }
  const denied = regularOver || (quotaLimits > 0 && quotaOver === quotaLimits);
  let metadata: Record<string, unknown> | undefined;
  for (let i = 0; i < planned.length; i++) {
    const p = planned[i]!;
    const decision = decisions[i]!;
    statuses[p.index] = matchedStatus(p, decision, p.shadow, p.quota && !denied);
    if (p.rule.metadata !== undefined && (decision.allowed || p.shadow)) metadata = mergeMetadata(metadata, p.rule.metadata);
  }
  const now = decisions.length === 0 ? (request.now ?? clock()) : decisions[0]!.now;
  const degraded = mostSevere(decisions);
  // The optional fields are set, not spread: no object made to be spread (issue 32).
  const result: { -readonly [K in keyof CheckResult]: CheckResult[K] } = { overallCode: denied && options.shadowMode !== true ? 'OVER_LIMIT' : 'OK', statuses, now };
  if (metadata !== undefined) result.metadata = metadata;
  if (degraded !== undefined) result.degraded = degraded;
  return result;
}

/**
 * One decision per planned limit, in plan order. The usual check — every limit enforced, none in
 * quota mode, each spending — is one group, one store round trip, and no bookkeeping.
 */
function decidePlanned(limiter: LimiterCore, planned: readonly Planned[], at: LimitAllOptions | undefined, spend: boolean): MaybePromise<Decision[]> {
  for (const p of planned) if (p.shadow || p.quota || p.cost === 0) return decideMixed(limiter, planned, at, spend);
  return decideGroup(limiter, planned, at, spend ? 'limit' : 'look');
}

/** Shadow-mode, quota-mode or check-only limits among the planned ones. */
async function decideMixed(limiter: LimiterCore, planned: readonly Planned[], at: LimitAllOptions | undefined, spend: boolean): Promise<Decision[]> {
  const shadow = planned.filter((p) => p.shadow);
  const enforced = planned.filter((p) => !p.shadow);
  const [enforcedDecisions, shadowDecisions] = await Promise.all([
    spend ? decideEnforced(limiter, enforced, at) : decideGroup(limiter, enforced, at, 'look'),
    Promise.all(shadow.map((p) => limiter.decide(p.counterKey, p.rule.policy, { ...at, cost: p.cost || 1, ...failureModeOf(p) }, modeOf(p, spend)))),
  ]);
  let nextEnforced = 0;
  let nextShadow = 0;
  return planned.map((p) => (p.shadow ? shadowDecisions[nextShadow++]! : enforcedDecisions[nextEnforced++]!));
}

/**
 * The limiter options of a check: its `now`, and its deadline — the call's, else the smallest of
 * the planned rules' `deadline_ms`, else the limiter's.
 */
function callOptions(plan: CheckPlan, request: CheckRequest, options: CheckOptions): LimitAllOptions | undefined {
  let deadlineMs = options.deadlineMs;
  if (deadlineMs === undefined) {
    for (const p of plan.planned) if (p.rule.deadlineMs !== undefined && (deadlineMs === undefined || p.rule.deadlineMs < deadlineMs)) deadlineMs = p.rule.deadlineMs;
  }
  // The usual check sets none of them: no options object at all.
  if (request.now === undefined && request.requestId === undefined && deadlineMs === undefined && options.failureMode === undefined) return undefined;
  const at: { -readonly [K in keyof LimitAllOptions]: LimitAllOptions[K] } = {};
  if (request.now !== undefined) at.now = request.now;
  if (request.requestId !== undefined) at.requestId = request.requestId;
  if (deadlineMs !== undefined) at.deadlineMs = deadlineMs;
  if (options.failureMode !== undefined) at.failureMode = options.failureMode;
  return at;
}

const SEVERITY: readonly DegradedReason[] = [DEGRADED_REASON.open, DEGRADED_REASON.local, DEGRADED_REASON.closed];

/** The most severe degraded reason among `decisions`, if any. */
export function mostSevere(decisions: readonly Decision[]): DegradedReason | undefined {
  let worst = -1;
  for (const decision of decisions) {
    const reason = degradedReasonOf(decision);
    if (reason !== undefined) worst = Math.max(worst, SEVERITY.indexOf(reason));
  }
  return worst === -1 ? undefined : SEVERITY[worst];
}

export function failureModeOf(p: Planned): { failureMode?: FailureMode } {
  return p.rule.failureMode === undefined ? {} : { failureMode: p.rule.failureMode };
}

/**
 * The enforced limits of a spending check. Check-only limits (cost 0) are probed first when the
 * request also spends, so a denying probe spends nothing. Spending limits go to the store together,
 * all-or-nothing; when only some quota-mode limits denied (their hits counted, as envoy counts
 * them), the others did not record, so they are decided again without the denied ones.
 */
async function decideEnforced(limiter: LimiterCore, enforced: readonly Planned[], at: LimitAllOptions | undefined): Promise<Decision[]> {
  const result = new Map<Planned, Decision>();
  const probes = enforced.filter((p) => p.cost === 0);
  let pending = enforced.filter((p) => p.cost > 0);
  if (probes.length > 0) {
    (await decideGroup(limiter, probes, at, 'probe')).forEach((d, i) => result.set(probes[i]!, d));
    const quota = enforced.filter((p) => p.quota);
    const probedOver = probes.some((p) => !p.quota && !result.get(p)!.allowed) || (quota.length > 0 && quota.every((p) => p.cost === 0 && !result.get(p)!.allowed));
    if (probedOver && pending.length > 0) {
      (await decideGroup(limiter, pending, at, 'look')).forEach((d, i) => result.set(pending[i]!, d));
      pending = [];
    }
  }
  const quotaCount = enforced.filter((p) => p.quota).length;
  while (pending.length > 0) {
    const decided = await decideGroup(limiter, pending, at, 'limit');
    decided.forEach((d, i) => result.set(pending[i]!, d));
    const deniedQuota = pending.filter((p, i) => p.quota && !decided[i]!.allowed);
    const regularDenied = pending.some((p, i) => !p.quota && !decided[i]!.allowed);
    const quotaOver = enforced.filter((p) => p.quota && !result.get(p)!.allowed).length;
    if (deniedQuota.length === 0 || regularDenied || quotaOver === quotaCount) break;
    pending = pending.filter((p) => !deniedQuota.includes(p));
  }
  return enforced.map((p) => result.get(p)!);
}

function decideGroup(limiter: LimiterCore, group: readonly Planned[], at: LimitAllOptions | undefined, mode: DecideMode): MaybePromise<Decision[]> {
  if (group.length === 0) return [];
  const requests: LimitRequest[] = [];
  for (const p of group) requests.push(groupRequest(p));
  return limiter.decideAll(requests, at, mode);
}

/**
 * A planned limit as the limiter takes it: its rule's failure mode, and its lease or local-first
 * interval (used when the check decides that limit alone), set only when the rule has them.
 */
function groupRequest(p: Planned): LimitRequest {
  const { rule } = p;
  const request: { -readonly [K in keyof LimitRequest]: LimitRequest[K] } = { key: p.counterKey, policy: rule.policy, cost: p.cost || 1 };
  if (rule.failureMode !== undefined) request.failureMode = rule.failureMode;
  if (rule.leaseSize !== undefined) request.lease = rule.leaseSize;
  else if (rule.syncIntervalMs !== undefined) request.syncIntervalMs = rule.syncIntervalMs;
  return request;
}

function modeOf(p: Planned, spend: boolean): DecideMode {
  if (!spend) return 'look';
  return p.cost === 0 ? 'probe' : 'limit';
}

/** What a rule's statuses report as its limit: one object per rule, shared by every status (frozen). */
const currentLimits = new WeakMap<CompiledRule, CurrentLimit>();

function currentLimitOf(rule: CompiledRule): CurrentLimit {
  let limit = currentLimits.get(rule);
  if (limit === undefined) {
    limit = Object.freeze({ requestsPerUnit: rule.requestsPerUnit!, unit: rule.unit!, unitMultiplier: rule.unitMultiplier, ...(rule.name !== undefined ? { name: rule.name } : {}) });
    currentLimits.set(rule, limit);
  }
  return limit;
}

/**
 * A matched limit's status; its times are relative to the instant its decision was made. Built
 * field by field in one order (the answers' JSON keeps it): no object made only to be spread.
 */
export function matchedStatus(p: Planned, decision: Decision, shadow: boolean, quotaPassed: boolean): DescriptorStatus {
  const { rule } = p;
  const over = !decision.allowed;
  const degraded = degradedReasonOf(decision);
  const status: { -readonly [K in keyof DescriptorStatus]: DescriptorStatus[K] } = {
    code: over && !shadow ? 'OVER_LIMIT' : 'OK',
    currentLimit: currentLimitOf(rule),
    // Over the limit, nothing is left (envoy never reports more, whatever a large cost left behind).
    limitRemaining: over ? 0 : decision.remaining,
    // A denied limit resets no sooner than the request could pass (a limit of 0: one window).
    durationUntilReset: Math.max(0, decision.resetAt - decision.now, over ? decision.retryAfter : 0),
  };
  if (over) {
    // A token bucket refills well before it is whole again: the real wait, for callers that retry.
    status.retryAfter = Math.max(0, decision.retryAfter);
    if (decision.reason === 'blocked') status.blocked = true;
    if (decision.blockStarted === true) status.blockStarted = true;
    if (shadow) status.shadowOverLimit = true;
    else if (quotaPassed) status.quotaOverLimit = true;
  }
  status.rule = rule.path;
  status.key = p.counterKey;
  if (degraded !== undefined) status.degraded = degraded;
  if (decision.delay !== undefined && !over) status.delay = decision.delay;
  return status;
}

/** envoy's merge: nested mappings merge, otherwise the first value written wins. */
function mergeMetadata(into: Record<string, unknown> | undefined, from: Readonly<Record<string, unknown>> | undefined): Record<string, unknown> | undefined {
  if (from === undefined) return into;
  const merged: Record<string, unknown> = { ...into };
  for (const [key, value] of Object.entries(from)) {
    const existing = merged[key];
    if (existing === undefined) merged[key] = value;
    else if (isMapping(existing) && isMapping(value)) merged[key] = mergeMetadata(existing, value);
  }
  return merged;
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const overrideRules = new Map<string, CompiledRule>();
const MAX_OVERRIDE_RULES = 1_024;

/** envoy's RateLimitOverride as a rule: a fixed window of one unit, nothing else (no shadow, no name). */
function overrideRule(limit: LimitOverride): CompiledRule {
  const id = `${limit.requestsPerUnit}/${limit.unit}`;
  let rule = overrideRules.get(id);
  if (rule !== undefined) {
    // Most recently used last: the Map's order is the eviction order.
    overrideRules.delete(id);
    overrideRules.set(id, rule);
    return rule;
  }
  rule = {
    policy: compilePolicy({ algorithm: 'fixed-window', limit: limit.requestsPerUnit, window: ruleWindowMs(limit.unit, 1) }),
    unit: limit.unit,
    requestsPerUnit: limit.requestsPerUnit,
    unitMultiplier: 1,
    unlimited: false,
    replaces: [],
    shadowMode: false,
    detailedMetric: false,
    quotaMode: false,
    cost: 1,
    path: `override:${id}`,
  };
  // Callers choose these values: keep the cache bounded, dropping the least recently used.
  if (overrideRules.size >= MAX_OVERRIDE_RULES) overrideRules.delete(overrideRules.keys().next().value!);
  overrideRules.set(id, rule);
  return rule;
}
