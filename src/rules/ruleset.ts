/**
 * The compiled rules: per domain, a tree of lookup maps built once at load time, so a check costs
 * one map lookup per descriptor entry however many rules there are. Immutable: a reload builds a
 * new RuleSet and swaps the reference, so a check never sees half-applied rules.
 */
import { createHash } from 'node:crypto';
import { currentTime } from '../clock.js';
import { RulesError } from '../errors.js';
import { compilePolicy, type CompiledPolicy } from '../policy.js';
import { ENVOY_UNIT_NAMES, ruleWindowMs } from '../units.js';
import { MAX_OVERRIDES, checkOverrides, listed, overrideId, type ListedOverride, type Override, type OverrideEntry, type OverrideInput } from './overrides.js';
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
  /** An override's limit (overrides.ts): the path of the rule it shadows. */
  readonly overrides?: string;
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
  /** What a counter key gains on reaching this node, before the value (match.ts, made on first use). */
  counterText: CounterText | undefined;
}

/** A node's counter-key text for a walk of `domain` reaching it by `key`: `|key=` escaped (`part`), and `domain` then that (`first`). */
export interface CounterText {
  readonly key: string;
  readonly domain: string;
  readonly part: string;
  readonly first: string;
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
    for (const name of this.domainNames()) {
      const root = this.domains.get(name)!;
      dumpNode(root, name, lines);
      if (root.lists !== undefined) lines.push(...root.lists.dump());
    }
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

  /**
   * The same rule set with each override's limit at its path (copy on write: this set is left as
   * it is), and the path of the rule each one shadows. An override whose domain is unknown or
   * whose path reaches no rule is left out (it applies nowhere).
   */
  withOverrides(overrides: readonly Override[]): { rules: RuleSet; shadows: Map<string, string> } {
    const roots = new Map(this.domains);
    const owned = new WeakSet<object>();
    const shadows = new Map<string, string>();
    const applied: string[] = [];
    for (const override of overrides) {
      const root = roots.get(override.domain);
      const shadowed = root === undefined ? undefined : ruleAlong(root, override.entries);
      if (shadowed === undefined) continue;
      roots.set(override.domain, graft(root!, override, shadowed.path, owned));
      shadows.set(override.id, shadowed.path);
      applied.push(`${override.id} ${JSON.stringify(override.written)}`);
    }
    return { rules: new RuleSet(roots, hashOf([this.version, ...applied])), shadows };
  }
}

/** Where a limiter reads the rules from, at the start of every check. */
export interface RuleSource {
  readonly current: RuleSet;
}

/** Options of {@link RulesHolder}. */
export interface RulesHolderOptions {
  /** The clock overrides expire by (epoch ms). Default: the process clock. */
  readonly clock?: () => number;
}

/**
 * Holds the rules in force and swaps them atomically: a check reads `current` once, so it sees
 * either the old rules or the new ones, never a mix. Rules come in layers: the files on disk, then
 * rules pushed through Redis (which replace the domains they name), then per-tenant overrides
 * (which outrank the rule they shadow, until they expire).
 */
export class RulesHolder implements RuleSource {
  private files: RuleSet;
  private pushed: RuleSet | undefined;
  private rules: RuleSet;
  private readonly clock: () => number;
  /** Overrides by id, in force or waiting for a rule to shadow. */
  private table = new Map<string, Override>();
  /** Override id → the path of the rule it shadows (those in force). */
  private shadows = new Map<string, string>();
  /** The earliest expiry among the overrides: `current` puts the rules together again from then. */
  private nextExpiry = Infinity;

  constructor(initial: RuleSet = new RuleSet(new Map(), 'empty'), options: RulesHolderOptions = {}) {
    this.files = initial;
    this.rules = initial;
    this.clock = options.clock ?? currentTime;
  }

  get current(): RuleSet {
    // One comparison per check; an override stops applying at its expiry, not at a timer's tick.
    if (this.nextExpiry !== Infinity && this.clock() >= this.nextExpiry) this.compose();
    return this.rules;
  }

  /** Puts new file rules in force (pushed domains and overrides still outrank them). */
  replace(files: RuleSet): void {
    this.files = files;
    this.compose();
  }

  /** The pushed layer alone (empty when nothing was pushed). */
  pushedRules(): RuleSet {
    return this.pushed ?? new RuleSet(new Map(), 'empty');
  }

  /** Puts new pushed rules in force, over the file rules. */
  replacePushed(pushed: RuleSet): void {
    this.pushed = pushed;
    this.compose();
  }

  /**
   * Puts overrides in force on this holder (one process; `OverridesSync` shares them through
   * Redis): each outranks the rule its path reaches, replacing an override of the same domain and
   * path. Throws a RulesError, changing nothing, for an invalid override, an unknown domain, a path
   * no rule matches, or more than MAX_OVERRIDES in all.
   */
  putOverride(input: OverrideInput | readonly OverrideInput[]): ListedOverride[] {
    const overrides = checkOverrides(Array.isArray(input) ? input : [input as OverrideInput], this.clock(), 'putOverride');
    this.checkPlaced(overrides);
    const table = new Map(this.table);
    for (const override of overrides) table.set(override.id, override);
    this.replaceOverrides([...table.values()]);
    return overrides.map((override) => listed(override, this.shadows.get(override.id)));
  }

  /** The overrides held (expired ones dropped), by id. */
  overrides(): ListedOverride[] {
    void this.current;
    return [...this.table.values()].sort((a, b) => (a.id < b.id ? -1 : 1)).map((override) => listed(override, this.shadows.get(override.id)));
  }

  /** Removes the override of `domain` at `entries`; false when there was none. */
  deleteOverride(domain: string, entries: readonly OverrideEntry[]): boolean {
    const id = overrideId(domain, entries);
    if (!this.table.has(id)) return false;
    this.replaceOverrides([...this.table.values()].filter((override) => override.id !== id));
    return true;
  }

  /** Removes every override of `domain`; resolves with how many there were. */
  deleteOverrides(domain: string): number {
    const kept = [...this.table.values()].filter((override) => override.domain !== domain);
    const removed = this.table.size - kept.length;
    if (removed > 0) this.replaceOverrides(kept);
    return removed;
  }

  /** The overrides held, as they were put (for the Redis sync, which stores them). */
  heldOverrides(): Override[] {
    void this.current;
    return [...this.table.values()];
  }

  /** Puts exactly these overrides in force (the Redis sync applies what Redis holds with it). */
  replaceOverrides(overrides: readonly Override[]): void {
    if (overrides.length > MAX_OVERRIDES) throw new RulesError('overrides', 1, 1, '', `${overrides.length} overrides; at most ${MAX_OVERRIDES} are held: delete some first`);
    this.table = new Map(overrides.map((override) => [override.id, override]));
    this.compose();
  }

  /** Throws a RulesError for an override whose domain is unknown or whose path reaches no rule. */
  checkPlaced(overrides: readonly Override[]): void {
    const base = this.base();
    for (const override of overrides) {
      const root = base.domain(override.domain);
      if (root === undefined) throw new RulesError('overrides', 1, 1, 'domain', `unknown domain ${JSON.stringify(override.domain)}; the rules have ${base.domainNames().join(', ') || 'no domain'}`);
      if (ruleAlong(root, override.entries) === undefined) {
        throw new RulesError('overrides', 1, 1, 'descriptors', `no rule of domain ${override.domain} matches the path ${override.id}: an override outranks a rule, so write the path of one (GET /rlconfig lists them)`);
      }
    }
  }

  private base(): RuleSet {
    return this.pushed === undefined ? this.files : this.files.withDomains(this.pushed);
  }

  /** Drops expired overrides and puts files, pushes and overrides together. */
  private compose(): void {
    const now = this.clock();
    for (const [id, override] of this.table) if (override.expiresAt !== undefined && override.expiresAt <= now) this.table.delete(id);
    const base = this.base();
    if (this.table.size === 0) {
      this.rules = base;
      this.shadows = new Map();
      this.nextExpiry = Infinity;
      return;
    }
    const { rules, shadows } = base.withOverrides([...this.table.values()]);
    this.rules = rules;
    this.shadows = shadows;
    this.nextExpiry = Math.min(...[...this.table.values()].map((override) => override.expiresAt ?? Infinity));
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
    ...(limit.share !== undefined ? { share: limit.share } : {}),
    // quota_mode counts every hit, over the limit too, as envoy does (fixed-window only: the loader checks).
    ...(descriptor.quotaMode ? { countRejected: true } : {}),
    ...(descriptor.ledger !== undefined ? { ledger: descriptor.ledger } : {}),
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
    const shadowing = rule.overrides === undefined ? '' : `, override_of: ${rule.overrides}`;
    const penalty = rule.unlimited || rule.policy.blockMs === 0 ? '' : `, block_duration: ${durationText(rule.policy.blockMs)}`;
    lines.push(`${key}: ${shape}, shadow_mode: ${rule.shadowMode}, quota_mode: ${rule.quotaMode}${extra}${penalty}${shadowing}`);
  }
  for (const [child, values] of node.exact) for (const [value, next] of values) dumpNode(next, `${key}.${child}_${value}`, lines);
  for (const [child, list] of node.wildcards) for (const wildcard of list) dumpNode(wildcard.node, `${key}.${child}_${wildcard.written}`, lines);
  for (const [child, next] of node.keyOnly) dumpNode(next, `${key}.${child}`, lines);
}

/** A duration as a rules file writes it, in its largest whole unit: `15m`, `90s`, `1500ms`. */
function durationText(ms: number): string {
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['m', 60_000], ['s', 1_000]] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** `, calendar: true, time_zone: Europe/Paris` for a calendar window's rule, else nothing. */
function calendarDump(policy: CompiledPolicy): string {
  return policy.calendar === undefined ? '' : `, calendar: true, time_zone: ${policy.calendar.timeZone}`;
}

/** The node one (key, value) leads to from `node`, as a check walks: exact value, then wildcard, then key only. */
function nextNode(node: RuleNode, key: string, value: string): RuleNode | undefined {
  return node.exact.get(key)?.get(value) ?? node.wildcards.get(key)?.find((wildcard) => wildcard.pattern.test(value))?.node ?? node.keyOnly.get(key);
}

/** The rule a descriptor of exactly `entries` would reach (match.ts walks the same way), or undefined. */
function ruleAlong(root: RuleNode, entries: readonly OverrideEntry[]): CompiledRule | undefined {
  let node: RuleNode | undefined = root;
  for (const { key, value } of entries) node = node === undefined ? undefined : nextNode(node, key, value);
  return node?.rule;
}

/** A shallow copy of `node` (its maps copied, their children shared), marked as owned by this graft. */
function ownCopy(node: RuleNode, owned: WeakSet<object>): RuleNode {
  if (owned.has(node)) return node;
  const copy = new RuleNode();
  for (const [key, values] of node.exact) copy.exact.set(key, values);
  for (const [key, list] of node.wildcards) copy.wildcards.set(key, list);
  for (const [key, child] of node.keyOnly) copy.keyOnly.set(key, child);
  copy.rule = node.rule;
  copy.slots = node.slots;
  copy.hasChildren = node.hasChildren;
  copy.lists = node.lists;
  owned.add(copy);
  return copy;
}

/** Each override's limit, compiled once (a put composes every override held again). */
const overrideRules = new WeakMap<Override, CompiledRule>();

function overrideRule(override: Override): CompiledRule {
  let rule = overrideRules.get(override);
  if (rule === undefined) overrideRules.set(override, (rule = compileRule(override.descriptor, override.id.replace(/\|/g, '.'))));
  return rule;
}

/**
 * Returns `root` (copied where the graft writes) with an exact child at each (key, value) of the
 * override's path, each a copy of the node a check reaches there today (so the rules below it
 * still apply), and the override's limit at the last.
 */
function graft(root: RuleNode, override: Override, shadowed: string, owned: WeakSet<object>): RuleNode {
  const top = ownCopy(root, owned);
  let node = top;
  override.entries.forEach(({ key, value }, i) => {
    const child = ownCopy(nextNode(node, key, value)!, owned);
    let values = node.exact.get(key);
    if (values === undefined || !owned.has(values)) {
      values = new Map(values);
      owned.add(values);
      node.exact.set(key, values);
    }
    values.set(value, child);
    node.hasChildren = true;
    if (i === override.entries.length - 1) child.rule = { ...overrideRule(override), overrides: shadowed };
    node = child;
  });
  return top;
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
