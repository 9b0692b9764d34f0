/**
 * Policies: what a limit is (`{ algorithm, limit, window, ... }`), validated once and compiled into
 * the numbers every decision needs, so the hot path does no parsing or checking.
 */
import { CALENDAR_NOMINAL_MS, checkCalendar, type CalendarPeriods } from './algorithms/calendar.js';
import { ALGORITHMS, algorithmTable, type AlgorithmName } from './algorithms/catalog.js';
import { checkLedger, type LedgerOptions, type LedgerSpec } from './algorithms/ledger-periods.js';
import { parseDuration } from './duration.js';
import { InvalidPolicyError, describeValue } from './errors.js';
import { unknownName } from './options.js';
import { checkShare, type ShareSpec } from './policy-share.js';

export { ALGORITHMS, type AlgorithmName } from './algorithms/catalog.js';
export { SHARE_RANGES, type ShareSpec } from './policy-share.js';

/** A rate limit as users write it. */
export interface Policy {
  /** Which algorithm decides. */
  readonly algorithm: AlgorithmName;
  /** Requests (cost units) per `window`; an integer ≥ 0. `0` denies everything. */
  readonly limit: number;
  /**
   * The window (or refill period) in milliseconds, or a duration string: `500ms`, `1s`, `1m`, `3h`, `1d`, `1w`.
   * fixed-window also takes a calendar period, `'day' | 'week' | 'month' | 'quarter' | 'year'`, in `timeZone`.
   */
  readonly window: number | string;
  /**
   * fixed-window with a calendar `window` only: the IANA time zone its periods follow (default
   * `'UTC'`), e.g. `'Europe/Paris'`: a day from local midnight, an ISO week from Monday 00:00, a
   * month from the 1st, a quarter from Jan/Apr/Jul/Oct 1st, a year from Jan 1st.
   */
  readonly timeZone?: string;
  /** Bucket capacity for token-bucket, leaky-bucket and gcra (default `limit`); ignored by window algorithms. */
  readonly burst?: number;
  /** Soft throttling: admit up to this many percent over the capacity (integer, default 0). */
  readonly softPercent?: number;
  /**
   * sliding-log: log rejected attempts too, so a caller who keeps trying stays blocked. fixed-window:
   * count rejected hits too, past the limit (envoyproxy/ratelimit's counting; rules' `quota_mode`).
   */
  readonly countRejected?: boolean;
  /**
   * fixed-window only: where a window starts. `aligned` (the default): at multiples of `window`
   * since the epoch, the same for every key. `first-hit`: at the key's first admitted request after
   * its previous window ended, so a fresh caller gets a whole window (express-rate-limit's stores).
   */
  readonly windowStart?: WindowStart;
  /**
   * sliding-window only: how many buckets the window is counted in (integer 1..100, default 1, the
   * two-window counter). More buckets estimate the rolling window more closely, for N + 1 counts per
   * key (docs/semantics.md, "sliding-window with precision N").
   */
  readonly precision?: number;
  /**
   * Penalty: once a request is denied, the key stays denied this long from that denial (ms or a
   * duration string, up to {@link POLICY_RANGES}.blockDuration), on every node sharing the store;
   * a denial during the block does not extend it (docs/semantics.md, "Penalties").
   */
  readonly blockDuration?: number | string;
  /**
   * Fair shares (fixed-window only): the keys of `group` share `limit` per window as the group's
   * total; each active key gets at least ⌊limit × weight / Σ active weights⌋ and an idle key's share
   * is lent to the busy ones (docs/semantics.md, "Fair shares"). `weight` a whole number 1..1000.
   */
  readonly share?: ShareSpec;
  /** A usage ledger for billing (docs/quotas.md §3): `true`, or its period, zone, retention, refusals, ids. */
  readonly ledger?: boolean | LedgerOptions;
}

/** Where a fixed window starts: see {@link Policy.windowStart}. */
export type WindowStart = 'aligned' | 'first-hit';
const WINDOW_STARTS: readonly WindowStart[] = ['aligned', 'first-hit'];

/** Whether an algorithm's capacity is `burst` (buckets that refill continuously). */
const USES_BURST = algorithmTable('usesBurst');
const MULTIPLIES_BY_WINDOW = algorithmTable('multipliesByWindow');
const POLICY_FIELDS: ReadonlySet<string> = new Set([
  'algorithm',
  'limit',
  'window',
  'burst',
  'softPercent',
  'countRejected',
  'ledger',
  'windowStart',
  'precision',
  'timeZone',
  'blockDuration',
  'share',
]);

/**
 * The whole-number fields of a policy and their ranges. compilePolicy checks these, and the rules
 * loader checks the same ranges at the YAML field (rules/parse/rate-limit.ts).
 */
export const POLICY_RANGES = Object.freeze({
  limit: { min: 0, max: Number.MAX_SAFE_INTEGER },
  burst: { min: 1, max: Number.MAX_SAFE_INTEGER },
  /**
   * In ms (parseDuration holds every duration to it). Past 2^53 − 1 the window's arithmetic rounds,
   * and the Redis script refuses the argument: a store that refuses a caller's policy must never
   * be how a policy is found out (issue 27).
   */
  window: { min: 1, max: Number.MAX_SAFE_INTEGER },
  /** What is admitted, soft allowance included: counted in doubles, exact up to 2^53 − 1. */
  capacity: { min: 1, max: Number.MAX_SAFE_INTEGER },
  /** At most 1000: 10× the capacity is already no limit at all. */
  softPercent: { min: 0, max: 1000 },
  /** At most 100 buckets: past that the counts take about as much room as a sliding log of a modest limit. */
  precision: { min: 1, max: 100 },
  /** In ms: at most 30 days; a longer ban is an administrator's (`POST /v1/keys/block`), not a policy's. */
  blockDuration: { min: 1, max: 30 * 86_400_000 },
});

/** What a policy admits, from its (valid) numbers. */
export interface PolicyCapacity {
  /** The bucket capacity: `burst` for the algorithms that use it, when given; else `limit`. */
  readonly burst: number;
  /** The quota `remaining` counts down from. */
  readonly nominalCapacity: number;
  /** What is actually admitted, soft allowance included. */
  readonly capacity: number;
  /** The field that sets the capacity: `burst` for token-bucket, leaky-bucket and gcra, else `limit`. */
  readonly setBy: 'burst' | 'limit';
}

/** The capacity of a policy with these numbers (already checked against {@link POLICY_RANGES}). */
export function policyCapacity(algorithm: AlgorithmName, limit: number, burst: number | undefined, softPercent: number): PolicyCapacity {
  const usesBurst = USES_BURST[algorithm];
  // Window algorithms accept and ignore burst (docs/algorithms.md), so shared rule files stay valid.
  const bucket = usesBurst && burst !== undefined ? burst : limit;
  const nominalCapacity = usesBurst ? bucket : limit;
  return {
    burst: bucket,
    nominalCapacity,
    capacity: Math.floor((nominalCapacity * (100 + softPercent)) / 100),
    setBy: usesBurst ? 'burst' : 'limit',
  };
}

/**
 * Whether `algorithm` needs its wide arithmetic for this capacity and window (docs/semantics.md,
 * "Wide policies"). Doubles (JS and Lua) are exact up to 2^53; the algorithms that multiply counts
 * by the window keep their plain integers up to (capacity + 1) × window ≤ 2^53 − 1, and past that
 * carry time as whole ms plus a remainder and multiply with mulDivmod. The others only add counts.
 */
export function needsWide(algorithm: AlgorithmName, capacity: number, windowMs: number): boolean {
  return MULTIPLIES_BY_WINDOW[algorithm] && (capacity + 1) * windowMs > Number.MAX_SAFE_INTEGER;
}

/** The bound of wide policies: limit, capacity, window, and a level algorithm's time to fill, ≤ 2^51. */
export const WIDE_BOUND = 2 ** 51;

/** The bound {@link countsExactly} applies, in words, naming the limit as `limitName` does. */
export function wideBound(algorithm: AlgorithmName, limitName: string): string {
  const fill = USES_BURST[algorithm] ? ` and a bucket that fills within ${WIDE_BOUND} ms (capacity × window ≤ ${WIDE_BOUND} × ${limitName})` : '';
  return `${algorithm} needs ${limitName} and capacity ≤ ${WIDE_BOUND}, window ≤ ${WIDE_BOUND} ms${fill}`;
}

/**
 * Whether `algorithm` counts this policy exactly: always for fixed-window and sliding-log; for the
 * others either in plain integers or, when wide, with limit, capacity and window ≤ 2^51 and (token-bucket,
 * leaky-bucket, gcra) a bucket that fills from empty in at most 2^51 ms (≈ 71,000 years):
 * capacity × window ≤ 2^51 × limit.
 */
export function countsExactly(algorithm: AlgorithmName, capacity: number, windowMs: number, limit: number): boolean {
  if (!needsWide(algorithm, capacity, windowMs)) return true;
  if (limit > WIDE_BOUND || capacity > WIDE_BOUND || windowMs > WIDE_BOUND) return false;
  return !USES_BURST[algorithm] || limit === 0 || BigInt(capacity) * BigInt(windowMs) <= BigInt(WIDE_BOUND) * BigInt(limit);
}

/**
 * A validated policy with everything derived up front. Create with {@link compilePolicy};
 * immutable. Durations are milliseconds.
 */
export class CompiledPolicy {
  readonly algorithm: AlgorithmName;
  /** Nominal `limit` per window. */
  readonly limit: number;
  readonly windowMs: number;
  /** Bucket capacity (token-bucket, leaky-bucket, gcra); equals `limit` for window algorithms. */
  readonly burst: number;
  readonly softPercent: number;
  readonly countRejected: boolean;
  /** fixed-window: windows start at the key's first hit (`windowStart: 'first-hit'`), not on epoch multiples. */
  readonly firstHit: boolean;
  /** The quota `remaining` counts down from and the `limit` every decision reports (C0). */
  readonly nominalCapacity: number;
  /** What is actually admitted, soft allowance included (C). */
  readonly capacity: number;
  /** `capacity − nominalCapacity`: admitted past `remaining: 0`. */
  readonly softExtra: number;
  /** sliding-window: buckets per window (1 for every other algorithm). */
  readonly precision: number;
  /** fixed-window with a calendar window: its unit, zone and periods (windowMs is then the unit's nominal length). */
  readonly calendar?: CalendarPeriods;
  /**
   * Identifies the stored state: the algorithm (a first-hit fixed window apart from an aligned one,
   * a sliding window's precision) and the window. Changing `limit`, `burst` or `softPercent` keeps a
   * key's counters; changing the algorithm, the window start, the precision or the window starts
   * fresh. Nothing process-wide is numbered by it: a store that wants a small number per state
   * gives one out itself, while it holds keys of that state (store/state-spaces.ts), so however many
   * windows callers name, no table fills up (issue 27).
   */
  readonly stateId: string;
  /**
   * Whether the algorithm decides with its wide arithmetic ((capacity + 1) × window > 2^53 − 1 for
   * token-bucket, leaky-bucket, gcra and sliding-window; docs/semantics.md). Decided once here so
   * the other policies keep their plain arithmetic.
   */
  readonly wide: boolean;
  /** Penalty length in ms after a denial (`blockDuration`); 0: no penalty. */
  readonly blockMs: number;
  /** Fair shares: the key's group and weight (`share`); absent for a key of its own. */
  readonly share?: ShareSpec;
  /** The usage ledger this policy's decisions are recorded in (`ledger`), if any. */
  readonly ledger?: LedgerSpec;

  /** @internal use {@link compilePolicy}. */
  constructor(fields: Omit<CompiledPolicy, never>) {
    this.algorithm = fields.algorithm;
    this.limit = fields.limit;
    this.windowMs = fields.windowMs;
    this.burst = fields.burst;
    this.softPercent = fields.softPercent;
    this.countRejected = fields.countRejected;
    this.firstHit = fields.firstHit;
    this.precision = fields.precision;
    if (fields.calendar !== undefined) this.calendar = fields.calendar;
    this.nominalCapacity = fields.nominalCapacity;
    this.capacity = fields.capacity;
    this.softExtra = fields.softExtra;
    this.stateId = fields.stateId;
    this.wide = fields.wide;
    this.blockMs = fields.blockMs;
    if (fields.share !== undefined) this.share = fields.share;
    if (fields.ledger !== undefined) this.ledger = fields.ledger;
    Object.freeze(this);
  }
}

/**
 * Validates a policy and derives its numbers. Throws {@link InvalidPolicyError} naming the field,
 * the value and the fix. Accepts an already compiled policy and returns it unchanged.
 */
export function compilePolicy(policy: Policy | CompiledPolicy): CompiledPolicy {
  return policy instanceof CompiledPolicy ? policy : compileFresh(policy, false);
}

/**
 * @internal tests only (not exported from the package): compiles a policy that fits the plain
 * arithmetic to decide with the wide one, to show both give the same decisions. The memory store
 * only: the Redis script always picks by the bound.
 */
export function compilePolicyForcingWide(policy: Policy): CompiledPolicy {
  return compileFresh(policy, true);
}

function compileFresh(policy: Policy, forceWide: boolean): CompiledPolicy {
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) {
    throw new InvalidPolicyError('policy', `expected an object like { algorithm: 'token-bucket', limit: 10, window: '1s' }, got ${describeValue(policy)}`);
  }
  const unknown = unknownName(policy, POLICY_FIELDS);
  if (unknown !== undefined) {
    throw new InvalidPolicyError(unknown, `unknown field ${JSON.stringify(unknown)}; a policy has ${[...POLICY_FIELDS].join(', ')}`);
  }
  const { algorithm } = policy;
  if (!(ALGORITHMS as readonly unknown[]).includes(algorithm)) {
    throw new InvalidPolicyError('algorithm', `algorithm ${describeValue(algorithm)} is not one of ${ALGORITHMS.join(', ')}`);
  }
  const limit = requireInteger('limit', policy.limit, POLICY_RANGES.limit.min);
  const calendar = checkCalendar(policy);
  const windowMs = calendar === undefined ? parseDuration(policy.window) : CALENDAR_NOMINAL_MS[calendar.unit];
  if (typeof windowMs === 'string') throw new InvalidPolicyError('window', `window ${windowMs}`);

  const requestedBurst = policy.burst === undefined ? undefined : requireInteger('burst', policy.burst, POLICY_RANGES.burst.min);
  const softPercent = policy.softPercent === undefined ? 0 : requireInteger('softPercent', policy.softPercent, POLICY_RANGES.softPercent.min);
  if (softPercent > POLICY_RANGES.softPercent.max) {
    throw new InvalidPolicyError('softPercent', `softPercent ${softPercent} is above ${POLICY_RANGES.softPercent.max}; use a higher limit instead`);
  }
  if (policy.countRejected !== undefined && typeof policy.countRejected !== 'boolean') {
    throw new InvalidPolicyError('countRejected', `countRejected must be true or false, got ${describeValue(policy.countRejected)}`);
  }
  const countRejected = policy.countRejected === true;
  if (countRejected && algorithm !== 'sliding-log' && algorithm !== 'fixed-window') {
    throw new InvalidPolicyError('countRejected', `countRejected applies to sliding-log and fixed-window only, not ${algorithm}; remove it or switch the algorithm`);
  }

  const firstHit = checkWindowStart(algorithm, policy.windowStart);
  const precision = checkPrecision(algorithm, policy.precision, windowMs);

  const { burst, nominalCapacity, capacity, setBy } = policyCapacity(algorithm, limit, requestedBurst, softPercent);
  checkCapacity(algorithm, { nominalCapacity, capacity, setBy }, softPercent, windowMs, limit);
  const share = checkShare(policy.share, policy as unknown as Readonly<Record<string, unknown>>, limit);
  return new CompiledPolicy({
    algorithm,
    limit,
    windowMs,
    burst,
    softPercent,
    countRejected,
    firstHit,
    precision,
    ...(calendar === undefined ? {} : { calendar }),
    nominalCapacity,
    capacity,
    softExtra: capacity - nominalCapacity,
    // A shared key's units are its group's: another state than the key's own window, one per group
    // (the over-limit cache and limitAll's shared states tell tenants of two groups apart by it).
    stateId: `${stateIdOf(algorithm, firstHit, precision, windowMs, calendar)}${share === undefined ? '' : `&share=${JSON.stringify(share.group)}`}`,
    wide: needsWide(algorithm, capacity, windowMs) || (forceWide && MULTIPLIES_BY_WINDOW[algorithm]),
    blockMs: checkBlockDuration(policy.blockDuration),
    ...(share === undefined ? {} : { share }),
    ...ledgerField(policy.ledger, calendar),
  });
}

function ledgerField(value: unknown, calendar: CalendarPeriods | undefined): { ledger?: LedgerSpec } {
  const ledger = checkLedger(value, calendar);
  return ledger === undefined ? {} : { ledger };
}

/** Throws unless the capacity is counted exactly: within 2^53 − 1, and within the wide bound where the algorithm needs it. */
function checkCapacity(algorithm: AlgorithmName, { nominalCapacity, capacity, setBy }: Omit<PolicyCapacity, 'burst'>, softPercent: number, windowMs: number, limit: number): void {
  if (capacity > POLICY_RANGES.capacity.max) {
    throw new InvalidPolicyError(
      'softPercent',
      `softPercent ${softPercent} lifts a ${setBy} of ${nominalCapacity} to a capacity of ${capacity}, past ${POLICY_RANGES.capacity.max} (2^53 − 1), where counts round; lower the softPercent or the ${setBy}`,
    );
  }
  if (!countsExactly(algorithm, capacity, windowMs, limit)) {
    throw new InvalidPolicyError(
      setBy,
      `${setBy} ${nominalCapacity} over a window of ${windowMs} ms is too large to count exactly; ` +
        `${wideBound(algorithm, 'limit')} (lower the ${setBy} or the window, or use fixed-window or sliding-log, which count any quota exactly)`,
    );
  }
}

/** The penalty in ms (0 when `blockDuration` is absent); throws unless a duration within its range. */
function checkBlockDuration(blockDuration: unknown): number {
  if (blockDuration === undefined) return 0;
  const ms = parseDuration(blockDuration);
  if (typeof ms === 'string') throw new InvalidPolicyError('blockDuration', `blockDuration ${ms}`);
  const { max } = POLICY_RANGES.blockDuration;
  if (ms > max) throw new InvalidPolicyError('blockDuration', `blockDuration ${ms} ms is longer than ${max} ms (30 days); block longer by hand (POST /v1/keys/block)`);
  return ms;
}

/** Whether `windowStart` asks for first-hit windows; throws if it is not a window start of a fixed window. */
function checkWindowStart(algorithm: AlgorithmName, windowStart: unknown): boolean {
  if (windowStart === undefined) return false;
  if (!(WINDOW_STARTS as readonly unknown[]).includes(windowStart)) {
    throw new InvalidPolicyError('windowStart', `windowStart must be ${WINDOW_STARTS.map((name) => `'${name}'`).join(' or ')}, got ${describeValue(windowStart)}`);
  }
  if (algorithm !== 'fixed-window') {
    throw new InvalidPolicyError('windowStart', `windowStart applies to fixed-window only, not ${algorithm}; remove it or switch the algorithm`);
  }
  return windowStart === 'first-hit';
}

/**
 * The sliding window's buckets per window; throws unless a whole number in range, on sliding-window,
 * with buckets of at least 1 ms (and a window within the bound its bucket arithmetic needs).
 */
function checkPrecision(algorithm: AlgorithmName, precision: unknown, windowMs: number): number {
  if (precision === undefined) return 1;
  const { min, max } = POLICY_RANGES.precision;
  const value = requireInteger('precision', precision, min);
  if (value > max) throw new InvalidPolicyError('precision', `precision ${value} is above ${max}; for an exact rolling window use sliding-log`);
  if (algorithm !== 'sliding-window') {
    throw new InvalidPolicyError('precision', `precision applies to sliding-window only, not ${algorithm}; remove it or switch the algorithm`);
  }
  const problem = precisionWindowProblem(value, windowMs);
  if (problem !== undefined) throw new InvalidPolicyError('precision', problem);
  return value;
}

/** Why a window cannot be split into `precision` buckets (each at least 1 ms, window ≤ 2^51 ms), or undefined. */
export function precisionWindowProblem(precision: number, windowMs: number): string | undefined {
  if (precision > 1 && windowMs < precision) {
    return `precision ${precision} splits a window of ${windowMs} ms into buckets shorter than 1 ms; lower the precision to ${windowMs} or less, or lengthen the window`;
  }
  if (precision > 1 && windowMs > WIDE_BOUND) return `precision ${precision} needs a window of at most ${WIDE_BOUND} ms, got ${windowMs}`;
  return undefined;
}

/**
 * A first-hit fixed window keeps its (count, start) apart from an aligned one's (count, window
 * index), and a sliding window of N > 1 buckets its N + 1 counts apart from the two-window counter's.
 */
function stateIdOf(algorithm: AlgorithmName, firstHit: boolean, precision: number, windowMs: number, calendar: CalendarPeriods | undefined): string {
  if (calendar !== undefined) return `${algorithm}@${calendar.unit}@${calendar.timeZone}`;
  return `${algorithm}${firstHit ? '@first-hit' : ''}${precision > 1 ? `/${precision}` : ''}:${windowMs}`;
}

/**
 * `derive`, a function of a policy's state alone (what {@link CompiledPolicy.stateId} names), computed
 * once per state rather than per decision. Bounded: at most `max` states are held, and all are
 * dropped when that is reached (only callers naming ever new windows get there; the values are
 * computed again as needed).
 */
export function cachedPerState<T>(derive: (policy: CompiledPolicy) => T, max = 4_096): (policy: CompiledPolicy) => T {
  const values = new Map<string, T>();
  return (policy) => {
    let value = values.get(policy.stateId);
    if (value === undefined) {
      if (values.size >= max) values.clear();
      value = derive(policy);
      values.set(policy.stateId, value);
    }
    return value;
  };
}

function requireInteger(field: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new InvalidPolicyError(field, `${field} must be a finite number, got ${describeValue(value)}`);
  }
  if (!Number.isInteger(value) || value < min) {
    throw new InvalidPolicyError(field, `${field} must be a whole number ≥ ${min}, got ${value}`);
  }
  if (!Number.isSafeInteger(value)) {
    throw new InvalidPolicyError(field, `${field} ${value} is too large`);
  }
  return value;
}

/** A value as text with its type, so { limit: '10' } never shares a cache entry with { limit: 10 }. */
function typedText(value: unknown): string {
  return `${typeof value}:${String(value)}`;
}

/** `share` as cache-key text ('' when absent); undefined unless exactly { group, weight } (then compiled uncached, which explains it). */
function shareText(share: unknown): string | undefined {
  if (share === undefined) return '';
  if (typeof share !== 'object' || share === null || Object.keys(share).length !== 2) return undefined;
  const { group, weight } = share as Record<string, unknown>;
  return `|share:${typeof group === 'string' ? JSON.stringify(group) : typedText(group)}|${typedText(weight)}`;
}

/**
 * Compiles policies once per policy object and once per distinct content, so that a policy
 * literal written inline at the call site does not pay validation on every decision.
 */
export class PolicyCache {
  private readonly byObject = new WeakMap<object, CompiledPolicy>();
  private readonly byContent = new Map<string, CompiledPolicy>();
  private static readonly MAX_CONTENT_ENTRIES = 10_000;

  /** The last policy object seen and its compiled form: hot loops pass the same object. */
  private lastPolicy: object | undefined;
  private lastCompiled: CompiledPolicy | undefined;

  get(policy: Policy | CompiledPolicy): CompiledPolicy {
    if (policy === this.lastPolicy) return this.lastCompiled!;
    const compiled = this.lookup(policy);
    this.lastPolicy = policy;
    this.lastCompiled = compiled;
    return compiled;
  }

  private lookup(policy: Policy | CompiledPolicy): CompiledPolicy {
    if (policy instanceof CompiledPolicy) return policy;
    if (typeof policy !== 'object' || policy === null) return compilePolicy(policy);
    const cached = this.byObject.get(policy);
    if (cached !== undefined) return cached;
    // A misspelt field must fail even when an equal-looking policy is already cached.
    for (const field in policy) if (!POLICY_FIELDS.has(field)) return compilePolicy(policy);
    const share = shareText(policy.share);
    if (share === undefined) return compilePolicy(policy);
    const contentKey = [policy.algorithm, policy.limit, policy.window, policy.burst, policy.softPercent, policy.countRejected, policy.windowStart, policy.precision, policy.timeZone, policy.blockDuration]
      .map(typedText)
      .join('|') + share + (policy.ledger === undefined ? '' : `|${JSON.stringify(policy.ledger)}`);
    let compiled = this.byContent.get(contentKey);
    if (compiled === undefined) {
      compiled = compilePolicy(policy);
      // Bounded: a caller generating endless distinct policies must not grow memory without limit.
      if (this.byContent.size >= PolicyCache.MAX_CONTENT_ENTRIES) this.byContent.clear();
      this.byContent.set(contentKey, compiled);
    }
    this.byObject.set(policy, compiled);
    return compiled;
  }
}

/**
 * A leaky bucket cut for shaping: its queue holds what passes at once (`delayAfter`) plus what
 * drains within `maxDelayMs` (one request per window / limit), so a request that would wait longer
 * is refused instead of held. Undefined when the policy's own burst is already that small. The
 * middleware's `shaping` and the gateway's `shaping.max_delay` both cut their buckets here.
 */
export function shapedLeakyBucket(policy: CompiledPolicy, maxDelayMs: number, delayAfter = 0): CompiledPolicy | undefined {
  const queue = delayAfter + Math.floor(maxDelayMs / (policy.windowMs / policy.limit)) + 1;
  if (queue >= policy.burst) return undefined;
  return compilePolicy({ algorithm: 'leaky-bucket', limit: policy.limit, window: policy.windowMs, burst: queue, softPercent: policy.softPercent });
}
