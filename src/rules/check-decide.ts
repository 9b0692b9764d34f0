/**
 * Deciding a check once its descriptors are matched: which limits apply (replaces, unlimited,
 * overrides), what each costs (a descriptor's explicit `hitsAddend: 0` only checks), and the
 * decisions — all-or-nothing for the enforced limits, quota-mode limits denying only when all of
 * them are over, shadow-mode limits never denying — then one status per descriptor.
 */
import type { Decision } from '../decision.js';
import { DEGRADED_REASON, degradedReasonOf, type DecideMode, type DegradedReason, type FailureMode, type LimitAllOptions, type LimiterCore } from '../limiter/index.js';
import { compilePolicy } from '../policy.js';
import type { MaybePromise } from '../store/types.js';
import { ruleWindowMs } from '../units.js';
import type { CheckOptions, CheckRequest, CheckResult, DescriptorStatus, LimitOverride } from './check-types.js';
import { UNLIMITED_REMAINING } from './check-types.js';
import { matchDescriptor, overrideCounterKey } from './match.js';
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

/** Matches every descriptor and drops replaced limits; unlimited ones are answered here. */
export function planCheck(root: RuleNode, request: CheckRequest, options: CheckOptions): CheckPlan {
  const statuses: DescriptorStatus[] = request.descriptors.map(() => NO_LIMIT);
  const matches = request.descriptors.map((descriptor) =>
    descriptor.limit !== undefined
      ? { rule: overrideRule(descriptor.limit), counterKey: overrideCounterKey(request.domain, descriptor.entries, descriptor.limit.unit) }
      : matchDescriptor(root, request.domain, descriptor.entries),
  );
  const replaced = new Set<string>();
  for (const match of matches) for (const name of match?.rule.replaces ?? []) replaced.add(name);
  const planned: Planned[] = [];
  matches.forEach((match, index) => {
    if (match === undefined) return;
    const { counterKey } = match;
    const rule = options.maxDelayMs === undefined ? match.rule : shapedRule(match.rule, options.maxDelayMs);
    if (rule.unlimited) {
      // As envoy: the largest uint32 remaining, so callers can tell it from "no limit".
      statuses[index] = { code: 'OK', limitRemaining: UNLIMITED_REMAINING, durationUntilReset: 0, rule: rule.path };
      return;
    }
    if (rule.name !== undefined && replaced.has(rule.name)) return;
    const descriptor = request.descriptors[index]!;
    // envoy's GetHitsAddends: a descriptor's own hits_addend, even 0; else the request's, at least 1.
    const hits = descriptor.hitsAddend ?? (request.hits || 1);
    planned.push({ index, rule, counterKey, cost: hits * rule.cost, quota: rule.quotaMode || options.quotaMode === true, shadow: rule.shadowMode });
  });
  return { statuses, planned };
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
    statuses[p.index] = matchedStatus(p, decision, { shadow: p.shadow, quotaPassed: p.quota && !denied });
    if (decision.allowed || p.shadow) metadata = mergeMetadata(metadata, p.rule.metadata);
  }
  const now = decisions.length === 0 ? (request.now ?? clock()) : decisions[0]!.now;
  const degraded = mostSevere(decisions);
  return {
    overallCode: denied && options.shadowMode !== true ? 'OVER_LIMIT' : 'OK',
    statuses,
    now,
    ...(metadata !== undefined ? { metadata } : {}),
    ...(degraded !== undefined ? { degraded } : {}),
  };
}

/**
 * One decision per planned limit, in plan order. The usual check — every limit enforced, none in
 * quota mode, each spending — is one group, one store round trip, and no bookkeeping.
 */
function decidePlanned(limiter: LimiterCore, planned: readonly Planned[], at: LimitAllOptions, spend: boolean): MaybePromise<Decision[]> {
  if (planned.every((p) => !p.shadow && !p.quota && p.cost > 0)) return decideGroup(limiter, planned, at, spend ? 'limit' : 'look');
  return decideMixed(limiter, planned, at, spend);
}

/** Shadow-mode, quota-mode or check-only limits among the planned ones. */
async function decideMixed(limiter: LimiterCore, planned: readonly Planned[], at: LimitAllOptions, spend: boolean): Promise<Decision[]> {
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
function callOptions(plan: CheckPlan, request: CheckRequest, options: CheckOptions): LimitAllOptions {
  let deadlineMs = options.deadlineMs;
  if (deadlineMs === undefined) {
    for (const p of plan.planned) if (p.rule.deadlineMs !== undefined && (deadlineMs === undefined || p.rule.deadlineMs < deadlineMs)) deadlineMs = p.rule.deadlineMs;
  }
  return {
    ...(request.now !== undefined ? { now: request.now } : {}),
    ...(request.requestId !== undefined ? { requestId: request.requestId } : {}),
    ...(deadlineMs !== undefined ? { deadlineMs } : {}),
    ...(options.failureMode !== undefined ? { failureMode: options.failureMode } : {}),
  };
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
async function decideEnforced(limiter: LimiterCore, enforced: readonly Planned[], at: LimitAllOptions): Promise<Decision[]> {
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

function decideGroup(limiter: LimiterCore, group: readonly Planned[], at: LimitAllOptions, mode: DecideMode): MaybePromise<Decision[]> {
  if (group.length === 0) return [];
  const requests = group.map((p) => ({ key: p.counterKey, policy: p.rule.policy, cost: p.cost || 1, ...failureModeOf(p), ...localModeOf(p) }));
  return limiter.decideAll(requests, at, mode);
}

/** A rule's lease or local-first interval, which the limiter uses when the check decides that limit alone. */
function localModeOf(p: Planned): { lease?: number; syncIntervalMs?: number } {
  if (p.rule.leaseSize !== undefined) return { lease: p.rule.leaseSize };
  return p.rule.syncIntervalMs !== undefined ? { syncIntervalMs: p.rule.syncIntervalMs } : {};
}

function modeOf(p: Planned, spend: boolean): DecideMode {
  if (!spend) return 'look';
  return p.cost === 0 ? 'probe' : 'limit';
}

/** A matched limit's status; its times are relative to the instant its decision was made. */
export function matchedStatus(p: Planned, decision: Decision, how: { shadow: boolean; quotaPassed: boolean }): DescriptorStatus {
  const { rule } = p;
  const over = !decision.allowed;
  const degraded = degradedReasonOf(decision);
  return {
    code: over && !how.shadow ? 'OVER_LIMIT' : 'OK',
    currentLimit: {
      requestsPerUnit: rule.requestsPerUnit!,
      unit: rule.unit!,
      unitMultiplier: rule.unitMultiplier,
      ...(rule.name !== undefined ? { name: rule.name } : {}),
    },
    // Over the limit, nothing is left (envoy never reports more, whatever a large cost left behind).
    limitRemaining: over ? 0 : decision.remaining,
    // A denied limit resets no sooner than the request could pass (a limit of 0: one window).
    durationUntilReset: Math.max(0, decision.resetAt - decision.now, over ? decision.retryAfter : 0),
    // A token bucket refills well before it is whole again: the real wait, for callers that retry.
    ...(over ? { retryAfter: Math.max(0, decision.retryAfter) } : {}),
    ...(over && decision.reason === 'blocked' ? { blocked: true as const } : {}),
    ...(over && decision.blockStarted === true ? { blockStarted: true as const } : {}),
    ...(over && how.shadow ? { shadowOverLimit: true } : {}),
    ...(over && how.quotaPassed && !how.shadow ? { quotaOverLimit: true } : {}),
    rule: rule.path,
    key: p.counterKey,
    ...(degraded !== undefined ? { degraded } : {}),
    ...(decision.delay !== undefined && !over ? { delay: decision.delay } : {}),
  };
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
