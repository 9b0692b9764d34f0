/**
 * Each check reduced to bounded labels, shared by the metrics and the dashboard: per descriptor
 * its domain, rule path, result and reason (why it got its result), and whether it was near its
 * limit. Computed once per event, whoever hears it first.
 */
import type { CheckEvent } from '../context.js';
import type { CompiledRule, RuleNode, RuleSet } from '../../rules/ruleset.js';
import type { DescriptorStatus } from '../../rules/check.js';

/** A limit is "near" when an admitted decision leaves at most this share of its quota. */
export const NEAR_LIMIT_SHARE = 0.2;

/** Label used when a descriptor matched no limit, and for a domain that is not in the rules. */
export const NO_RULE = '(none)';
export const UNKNOWN_DOMAIN = '(unknown)';
/** Domain and rule label of `POST /v1/limit` decisions (one key and a policy, no domain or rules). */
export const LIMIT_API = '(v1/limit)';
/**
 * Distinct unknown domains counted by name per process (`tollgate_unknown_domain_checks_total`, the
 * dashboard); later ones are counted under `(other)`: an attacker sending random domains adds one series.
 */
export const UNKNOWN_DOMAIN_CAP = 100;
/** The rule of a status denied by a block set by hand (see decide.ts). */
export const BLOCKED_RULE = 'blocked';
/** Label for a status whose rule is neither in the rules nor a block. */
export const OTHER_RULE = '(other)';

/** Per-descriptor result: the status code, with shadow-mode excesses apart. */
export type DescriptorResult = 'ok' | 'over_limit' | 'shadow_over_limit';

/**
 * Why a descriptor got its result:
 * - `within_limit`: a limit applied and admitted it;
 * - `limit_exceeded`: its own limit denied it;
 * - `other_limit_exceeded`: its limit would have admitted it, but another limit of the same request
 *   denied the request (all-or-nothing: nothing was recorded);
 * - `shadow_mode`: a shadow-mode limit was exceeded (reported, not enforced);
 * - `blocked`: refused by a block: an entry of the descriptor blocked by hand (rule `blocked`), or
 *   its limit's penalty (`block_duration`; its rule path) during the block (the denial that starts
 *   a block is `limit_exceeded`: its quota denied it; the outcome says `blockStarted`);
 * - `no_rule`: no limit applied (no match, unlimited, or replaced);
 * - `unknown_domain`: the request's domain is not in the rules;
 * - `allow_list` / `deny_list`: an entry of the descriptor is on the domain's allow or deny list,
 *   which decided the request before any limit (rule `<domain>.allow.<key>` / `<domain>.deny.<key>`).
 */
export type DescriptorReason = 'within_limit' | 'limit_exceeded' | 'other_limit_exceeded' | 'shadow_mode' | 'blocked' | 'no_rule' | 'unknown_domain' | 'allow_list' | 'deny_list';

/** One descriptor of a check, reduced to bounded labels (plus the key, for the dashboard only). */
export interface DescriptorOutcome {
  /** The domain, or {@link UNKNOWN_DOMAIN} when it is not in the rules. */
  readonly domain: string;
  /** The rule path (from the configuration), or {@link NO_RULE}. */
  readonly rule: string;
  readonly result: DescriptorResult;
  readonly reason: DescriptorReason;
  /** Admitted with at most {@link NEAR_LIMIT_SHARE} of the quota left. */
  readonly near: boolean;
  /** Whether the limit is in shadow mode. */
  readonly shadow: boolean;
  /** The event's key for this status (may hold request values: never a metric label). */
  readonly key: string | undefined;
  /** This denial started its limit's penalty (`block_duration`). */
  readonly blockStarted?: true;
}

const ruleIndexes = new WeakMap<RuleSet, Map<string, CompiledRule>>();

/** Every rule of `rules` by path (built once per rule set, so a reload is picked up). */
export function ruleIndex(rules: RuleSet): Map<string, CompiledRule> {
  let index = ruleIndexes.get(rules);
  if (index !== undefined) return index;
  index = new Map();
  const visit = (node: RuleNode): void => {
    if (node.rule !== undefined) index!.set(node.rule.path, node.rule);
    for (const values of node.exact.values()) for (const child of values.values()) visit(child);
    for (const list of node.wildcards.values()) for (const child of list) visit(child.node);
    for (const child of node.keyOnly.values()) visit(child);
  };
  for (const name of rules.domainNames()) visit(rules.domain(name)!);
  ruleIndexes.set(rules, index);
  return index;
}

/**
 * The last event classified, and its outcomes: the metrics and the dashboard hear each event one
 * after the other, so the second listener finds the first one's work here (a WeakMap per event
 * cost more than the classification it saved).
 */
let lastEvent: CheckEvent | undefined;
let lastOutcomes: DescriptorOutcome[] = [];

/** Classifies each status of a check (shared by the metrics and the dashboard; computed once per event). */
export function classifyCheck(rules: RuleSet, event: CheckEvent): DescriptorOutcome[] {
  if (event !== lastEvent) {
    lastOutcomes = classifyOnce(rules, event);
    lastEvent = event;
  }
  return lastOutcomes;
}

function classifyOnce(rules: RuleSet, event: CheckEvent): DescriptorOutcome[] {
  if (event.via === 'limit') return event.result.statuses.map((status, i) => classifyLimitCall(status, event.keys[i]));
  const knownDomain = rules.domain(event.domain) !== undefined;
  const denied = event.result.overallCode === 'OVER_LIMIT';
  const index = ruleIndex(rules);
  return event.result.statuses.map((status, i) => classifyStatus(status, event.domain, knownDomain, denied, index, event.keys[i]));
}

function classifyStatus(
  status: DescriptorStatus,
  domain: string,
  knownDomain: boolean,
  denied: boolean,
  index: Map<string, CompiledRule>,
  key: string | undefined,
): DescriptorOutcome {
  const domainLabel = knownDomain ? domain : UNKNOWN_DOMAIN;
  if (status.rule === undefined) {
    return { domain: domainLabel, rule: NO_RULE, result: 'ok', reason: knownDomain ? 'no_rule' : 'unknown_domain', near: false, shadow: false, key };
  }
  // Denied by a block set by hand (POST /v1/blocks), before any rule.
  if (status.rule === BLOCKED_RULE) {
    return { domain: domainLabel, rule: BLOCKED_RULE, result: 'over_limit', reason: 'blocked', near: false, shadow: false, key };
  }
  if (status.list !== undefined) {
    const result = status.code === 'OVER_LIMIT' ? 'over_limit' : 'ok';
    return { domain: domainLabel, rule: status.rule, result, reason: status.list === 'deny' ? 'deny_list' : 'allow_list', near: false, shadow: false, key };
  }
  const compiled = index.get(status.rule);
  // A path the rules no longer hold (reloaded between the decision and now) is still a configured
  // path when it is under the request's known domain; anything else is not trusted as a label.
  const path = compiled !== undefined || (knownDomain && status.rule.startsWith(`${domain}.`)) ? status.rule : OTHER_RULE;
  const rule = compiled?.detailedMetric === true && key !== undefined ? detailedLabel(path, key) : path;
  const shadow = compiled?.shadowMode ?? false;
  if (status.shadowOverLimit === true) return { domain, rule, result: 'shadow_over_limit', reason: 'shadow_mode', near: false, shadow: true, key };
  if (status.code === 'OVER_LIMIT') return overLimit(status, { domain, rule, shadow, key });
  if (denied && !shadow) return { domain, rule, result: 'ok', reason: 'other_limit_exceeded', near: false, shadow, key };
  const capacity = compiled?.policy.nominalCapacity ?? status.currentLimit?.requestsPerUnit ?? 0;
  const near = capacity > 0 && status.limitRemaining <= capacity * NEAR_LIMIT_SHARE;
  return { domain, rule, result: 'ok', reason: 'within_limit', near, shadow, key };
}

/** A `/v1/limit` decision: its own domain and rule label, since it names neither. */
function classifyLimitCall(status: DescriptorStatus, key: string | undefined): DescriptorOutcome {
  const base = { domain: LIMIT_API, rule: LIMIT_API, shadow: false, key };
  if (status.rule === BLOCKED_RULE) return { ...base, result: 'over_limit', reason: 'blocked', near: false };
  if (status.code === 'OVER_LIMIT') return overLimit(status, base);
  const capacity = status.currentLimit?.requestsPerUnit ?? 0;
  return { ...base, result: 'ok', reason: 'within_limit', near: capacity > 0 && status.limitRemaining <= capacity * NEAR_LIMIT_SHARE };
}

/**
 * A status its limit denied: by the quota (`limit_exceeded`; the denial that starts a penalty
 * says `blockStarted`), or by the penalty it serves (`blocked`).
 */
function overLimit(status: DescriptorStatus, base: Pick<DescriptorOutcome, 'domain' | 'rule' | 'shadow' | 'key'>): DescriptorOutcome {
  if (status.blockStarted === true) return { ...base, result: 'over_limit', reason: 'limit_exceeded', near: false, blockStarted: true };
  return { ...base, result: 'over_limit', reason: status.blocked === true ? 'blocked' : 'limit_exceeded', near: false };
}

/** Distinct labels `detailed_metric` rules may add (each request value is one), before they fall back to the rule's path. */
export const MAX_DETAILED_LABELS = 10_000;
const detailedLabels = new Set<string>();

/**
 * envoy's `detailed_metric`: the rule's label names the request's values (`rl.unspec=some_value`,
 * from its counter key `rl|unspec=some_value`), as envoy's stats key does; bounded, since every
 * value is a new series.
 */
function detailedLabel(path: string, key: string): string {
  const label = key.split('|').join('.');
  if (detailedLabels.has(label)) return label;
  if (detailedLabels.size >= MAX_DETAILED_LABELS) return path;
  detailedLabels.add(label);
  return label;
}

