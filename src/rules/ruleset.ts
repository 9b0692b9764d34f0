/**
 * The compiled rules: per domain, a tree of lookup maps built once at load time, so a check costs
 * one map lookup per descriptor entry however many rules there are. Immutable: a reload builds a
 * new RuleSet and swaps the reference, so a check never sees half-applied rules.
 */
import { createHash } from 'node:crypto';
import { compilePolicy, type CompiledPolicy } from '../policy.js';
import { ENVOY_UNIT_NAMES, ruleWindowMs } from '../units.js';
import type { ConcurrencyConfig, DescriptorConfig, DomainConfig, FailureMode, RuleUnit } from './types.js';
import { compileLists, type DomainLists } from './lists.js';

export { UNIT_SECONDS } from '../units.js';

/** A limit at a node of the tree, ready to decide. */
export interface CompiledRule {
  readonly policy: CompiledPolicy;
  readonly name?: string;
  readonly unit?: RuleUnit;
  readonly requestsPerUnit?: number;
  readonly unitMultiplier: number;
  readonly unlimited: boolean;
  readonly replaces: readonly string[];
  readonly shadowMode: boolean;
  readonly detailedMetric: boolean;
  readonly quotaMode: boolean;
  /** Absent: the limiter's failure mode. */
  readonly failureMode?: FailureMode;
  /** Absent: the limiter's deadline. */
  readonly deadlineMs?: number;
  /** A token lease of this many units, when the check decides this limit alone. */
  readonly leaseSize?: number;
  /** Local-first, syncing every this many ms, when the check decides this limit alone. */
  readonly syncIntervalMs?: number;
  /** Units per hit. */
  readonly cost: number;
  /** `key` or `key=value` path from the domain root, for metrics and logs. */
  readonly path: string;
  /** envoy: the descriptor's `metadata`, returned when this limit applied and passed. */
  readonly metadata?: Readonly<Record<string, unknown>>;
}

interface WildcardChild {
  readonly pattern: RegExp;
  /** The value as written (`foo*`), used as the counter's value when values share one counter. */
  readonly written: string;
  readonly shareThreshold: boolean;
  readonly node: RuleNode;
}

/** One level of the tree: children by exact (key, value), wildcard value, or key only. */
export class RuleNode {
  /** key → value → child: looked up with the request's own strings, no concatenation. */
  readonly exact = new Map<string, Map<string, RuleNode>>();
  readonly wildcards = new Map<string, WildcardChild[]>();
  readonly keyOnly = new Map<string, RuleNode>();
  rule: CompiledRule | undefined;
  /** The descriptor's concurrency limit (`/v1/acquire`, rules/concurrency.ts), and its path for messages. */
  slots: (ConcurrencyConfig & { readonly path: string }) | undefined;
  /** Whether any child exists (a leaf stops the walk). */
  hasChildren = false;
  /** A domain's root: its allow and deny lists, if it has any (lists.ts). */
  lists: DomainLists | undefined;
}

const UNLIMITED_POLICY = compilePolicy({ algorithm: 'fixed-window', limit: 1, window: 1_000 });

/** The rules of every domain, compiled. */
export class RuleSet {
  /** Content hash of the sources: the loaded version, visible in health and metrics. */
  readonly version: string;
  private readonly domains: ReadonlyMap<string, RuleNode>;

  constructor(domains: ReadonlyMap<string, RuleNode>, version: string) {
    this.domains = domains;
    this.version = version;
  }

  /** A RuleSet is its own {@link RuleSource}: fixed rules, never swapped. */
  get current(): RuleSet {
    return this;
  }

  /** The root of `domain`'s tree, or undefined (unknown domain: nothing is limited). */
  domain(name: string): RuleNode | undefined {
    return this.domains.get(name);
  }

  /** Domain names, sorted. */
  domainNames(): string[] {
    return [...this.domains.keys()].sort();
  }

  /**
   * Every limit, one line each, as envoyproxy/ratelimit's `/rlconfig` dumps them (its key, unit,
   * requests per unit, shadow and quota mode), then Tollgate's own fields; domains sorted.
   */
  dump(): string {
    const lines: string[] = [];
    for (const name of this.domainNames()) dumpNode(this.domains.get(name)!, name, lines);
    return lines.map((line) => `${line}\n`).join('');
  }

  /** A rule set of these domains among `names` (the others left out). */
  only(names: readonly string[]): RuleSet {
    const kept = new Map<string, RuleNode>();
    for (const name of names) {
      const root = this.domains.get(name);
      if (root !== undefined) kept.set(name, root);
    }
    return new RuleSet(kept, hashOf([this.version, ...kept.keys()]));
  }

  /** The same rule set with `replacement`'s domains put in place of (or beside) these. */
  withDomains(replacement: RuleSet): RuleSet {
    const merged = new Map(this.domains);
    for (const name of replacement.domainNames()) merged.set(name, replacement.domain(name)!);
    return new RuleSet(merged, hashOf([this.version, replacement.version]));
  }
}

/** Where a limiter reads the rules from, at the start of every check. */
export interface RuleSource {
  readonly current: RuleSet;
}

/**
 * Holds the rules in force and swaps them atomically: a check reads `current` once, so it sees
 * either the old rules or the new ones, never a mix. Rules come in layers: the files on disk, then
 * rules pushed through Redis (which replace the domains they name).
 */
export class RulesHolder implements RuleSource {
  private files: RuleSet;
  private pushed: RuleSet | undefined;
  private rules: RuleSet;

  constructor(initial: RuleSet = new RuleSet(new Map(), 'empty')) {
    this.files = initial;
    this.rules = initial;
  }

  get current(): RuleSet {
    return this.rules;
  }

  /** Puts new file rules in force (pushed domains still override them). */
  replace(files: RuleSet): void {
    this.files = files;
    this.rules = this.pushed === undefined ? files : files.withDomains(this.pushed);
  }

  /** The pushed layer alone (empty when nothing was pushed). */
  pushedRules(): RuleSet {
    return this.pushed ?? new RuleSet(new Map(), 'empty');
  }

  /** Puts new pushed rules in force, over the file rules. */
  replacePushed(pushed: RuleSet): void {
    this.pushed = pushed;
    this.rules = this.files.withDomains(pushed);
  }
}

/** Compiles validated domain configs into a RuleSet. `texts` (the sources) give its version. */
export function compileRules(domains: readonly DomainConfig[], texts: readonly string[] = []): RuleSet {
  const roots = new Map<string, RuleNode>();
  for (const domain of domains) {
    const root = new RuleNode();
    addChildren(root, domain.descriptors, domain.domain);
    root.lists = compileLists(domain);
    roots.set(domain.domain, root);
  }
  return new RuleSet(roots, hashOf(texts.length > 0 ? texts : domains.map((d) => JSON.stringify(d))));
}

function addChildren(parent: RuleNode, descriptors: readonly DescriptorConfig[], parentPath: string): void {
  for (const descriptor of descriptors) {
    const node = new RuleNode();
    const path = `${parentPath}.${descriptor.key}${descriptor.value === undefined ? '' : `=${descriptor.value}`}`;
    if (descriptor.rateLimit !== undefined) node.rule = compileRule(descriptor, path);
    if (descriptor.concurrency !== undefined) node.slots = { ...descriptor.concurrency, path };
    addChildren(node, descriptor.descriptors, path);
    parent.hasChildren = true;
    const { key, value } = descriptor;
    if (value === undefined) {
      parent.keyOnly.set(key, node);
    } else if (value.includes('*')) {
      const list = parent.wildcards.get(key) ?? [];
      list.push({ pattern: globToRegExp(value), written: value, shareThreshold: descriptor.shareThreshold, node });
      parent.wildcards.set(key, list);
    } else {
      let values = parent.exact.get(key);
      if (values === undefined) {
        values = new Map();
        parent.exact.set(key, values);
      }
      values.set(value, node);
    }
  }
}

function compileRule(descriptor: DescriptorConfig, path: string): CompiledRule {
  const limit = descriptor.rateLimit!;
  const base = {
    name: limit.name,
    unit: limit.unit,
    requestsPerUnit: limit.requestsPerUnit,
    unitMultiplier: limit.unitMultiplier,
    unlimited: limit.unlimited,
    replaces: limit.replaces,
    shadowMode: descriptor.shadowMode,
    detailedMetric: descriptor.detailedMetric,
    quotaMode: descriptor.quotaMode,
    ...(limit.failureMode !== undefined ? { failureMode: limit.failureMode } : {}),
    ...(limit.deadlineMs !== undefined ? { deadlineMs: limit.deadlineMs } : {}),
    ...(limit.leaseSize !== undefined ? { leaseSize: limit.leaseSize } : {}),
    ...(limit.syncIntervalMs !== undefined ? { syncIntervalMs: limit.syncIntervalMs } : {}),
    cost: limit.cost ?? 1,
    path,
    ...(descriptor.metadata !== undefined ? { metadata: descriptor.metadata } : {}),
  };
  if (limit.unlimited || limit.unit === undefined || limit.requestsPerUnit === undefined) {
    return { ...base, policy: UNLIMITED_POLICY };
  }
  const policy = compilePolicy({
    algorithm: limit.algorithm,
    limit: limit.requestsPerUnit,
    // calendar: true: the unit on the calendar in its zone (the loader took day, week, month or year only).
    window: limit.calendar === true ? limit.unit : ruleWindowMs(limit.unit, limit.unitMultiplier),
    ...(limit.calendar === true ? { timeZone: limit.timeZone ?? 'UTC' } : {}),
    ...(limit.burst !== undefined ? { burst: limit.burst } : {}),
    ...(limit.precision !== undefined ? { precision: limit.precision } : {}),
    softPercent: limit.softPercent,
    ...(limit.blockMs !== undefined ? { blockDuration: limit.blockMs } : {}),
    // quota_mode counts every hit, over the limit too, as envoy does (fixed-window only: the loader checks).
    ...(descriptor.quotaMode ? { countRejected: true } : {}),
  });
  return { ...base, policy };
}

function dumpNode(node: RuleNode, key: string, lines: string[]): void {
  const rule = node.rule;
  if (rule !== undefined) {
    const shape = rule.unlimited
      ? 'unit=UNKNOWN requests_per_unit=0'
      : `unit=${ENVOY_UNIT_NAMES[rule.unit!]} requests_per_unit=${rule.requestsPerUnit}`;
    const extra = rule.unlimited ? ', unlimited: true' : `, algorithm: ${rule.policy.algorithm}${rule.policy.precision === 1 ? '' : `, precision: ${rule.policy.precision}`}${rule.unitMultiplier === 1 ? '' : `, unit_multiplier: ${rule.unitMultiplier}`}${calendarDump(rule.policy)}`;
    lines.push(`${key}: ${shape}, shadow_mode: ${rule.shadowMode}, quota_mode: ${rule.quotaMode}${extra}`);
  }
  for (const [child, values] of node.exact) for (const [value, next] of values) dumpNode(next, `${key}.${child}_${value}`, lines);
  for (const [child, list] of node.wildcards) for (const wildcard of list) dumpNode(wildcard.node, `${key}.${child}_${wildcard.written}`, lines);
  for (const [child, next] of node.keyOnly) dumpNode(next, `${key}.${child}`, lines);
}

/** `, calendar: true, time_zone: Europe/Paris` for a calendar window's rule, else nothing. */
function calendarDump(policy: CompiledPolicy): string {
  return policy.calendar === undefined ? '' : `, calendar: true, time_zone: ${policy.calendar.timeZone}`;
}

/** `*` matches any run of characters (possibly empty); everything else literally. */
function globToRegExp(glob: string): RegExp {
  const body = glob
    .split('*')
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
    .join('[\\s\\S]*');
  return new RegExp(`^${body}$`);
}

function hashOf(parts: readonly string[]): string {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part).update('\u0000');
  return hash.digest('hex').slice(0, 16);
}
