/**
 * The middleware's options: their types, and their validation, done once when a middleware is
 * created. Every refusal is an {@link InvalidOptionError} that says what to write instead.
 */
import { InvalidOptionError, describeValue } from '../errors.js';
import { checkFailureMode as checkMode, checkLeasable, checkLease, checkSyncInterval, MAX_LIMITS_PER_CHECK, type BreakerOptions, type FailureMode, type OverLimitCacheOptions } from '../limiter/index.js';
import { countsInWindows, describeState } from '../algorithms/window-add.js';
import { compilePolicy, shapedLeakyBucket, type CompiledPolicy, type Policy } from '../policy.js';
import type { RateLimitDescriptor } from '../rules/check.js';
import { RuleSet, type RuleSource } from '../rules/ruleset.js';
import type { MaybePromise, Store } from '../store/types.js';
import type { ClientIpOptions } from './identity/index.js';
import { HEADER_STYLES, type HeaderStyle } from './report.js';
import type { RequestView } from './view.js';
import { checkDuration, checkOptions, checkWholeNumber, optionalFunction, unknownName } from '../options.js';
import { closestMatch } from '../rules/parse/suggest.js';
import { compactWindow } from '../units.js';
import { foreignOptionHints, foreignStoreHint } from './foreign-options.js';
import type { SettleHook } from './settle.js';

/** Who a request counts against. `undefined`: this limit does not apply to the request. */
export type KeyFunction<Req> = (req: Req, view: RequestView) => MaybePromise<string | undefined>;
/** How many units a request costs; 0 reports the quota without spending it. */
export type CostOption<Req> = number | ((req: Req, view: RequestView) => MaybePromise<number>);

/** One limit of a middleware. */
export interface LimitSpec<Req> {
  /** Names the policy in headers and 429 bodies, and namespaces its counters (default from the policy: `100-per-1m`). */
  readonly name?: string;
  readonly policy: Policy;
  /** Default: the middleware's `key`, else the client IP. */
  readonly key?: KeyFunction<Req>;
  /** This limit's answer when the store fails; default: the middleware's `failureMode`. */
  readonly failureMode?: FailureMode;
  /** A token lease of this many units per store call (2 to 1,000,000; docs/scaling.md): never over the limit. */
  readonly lease?: number;
  /** Local-first, syncing every this many ms (10 to 60,000; docs/scaling.md): no store round trip, some over-admission. */
  readonly syncIntervalMs?: number;
}

/** The `concurrency` option (concurrency.ts). */
export interface ConcurrencyOptions<Req> {
  /** Most requests of one caller in flight at once (1 to 100,000). */
  readonly limit: number;
  /** Longest a slot is held if its release never comes (the process died): ms or a duration like `'30s'`. */
  readonly ttl: number | string;
  /** Who a request counts against (default: the middleware's `key`, else the client IP); `undefined`: not limited. */
  readonly key?: KeyFunction<Req>;
}

/** Traffic shaping with a leaky bucket: a request over the rate waits its turn instead of being refused. */
export interface ShapingOptions {
  /** Longest a request may be held (ms or a duration string). Requests that would wait longer are refused. */
  readonly maxDelay: number | string;
  /** This many queued requests pass at once, without waiting (nginx's `delay=`). Default 0. */
  readonly delayAfter?: number;
}

export interface CoreOptions<Req> {
  /** Where counters live (default: a memory store of this middleware's own). */
  readonly store?: Store;
  /** One policy, decided for `key` (or the client IP). */
  readonly policy?: Policy;
  /** Several policies decided together, all-or-nothing: a request refused by one spends none of the others. */
  readonly limits?: readonly LimitSpec<Req>[];
  /** Name of the single `policy`. */
  readonly name?: string;
  /** Envoy-style rules instead of policies: a `RuleSet` (loadRules) or a `RulesHolder` (hot reload, pushes). */
  readonly rules?: RuleSource;
  /** The rules domain to check (required with `rules`). */
  readonly domain?: string;
  /** The request's descriptors (default: one `remote_address` entry with the client IP). */
  readonly descriptors?: (req: Req, view: RequestView) => MaybePromise<readonly RateLimitDescriptor[]>;
  readonly key?: KeyFunction<Req>;
  readonly cost?: CostOption<Req>;
  /** Requests for which this returns true are not limited and get no headers. */
  readonly skip?: (req: Req, view: RequestView) => MaybePromise<boolean>;
  /** Which rate-limit headers to send (default `legacy`: X-RateLimit-*). */
  readonly headers?: HeaderStyle;
  /** Overrides the 429 body's `message`. */
  readonly message?: string;
  readonly shaping?: ShapingOptions;
  /**
   * When the store fails, times out or its breaker is open: `local` (default) enforces
   * ⌈limit / nodes⌉ in this process (nodes: those counted alive on Redis, at least `expectedNodes`), `open` lets requests through, `closed` refuses them
   * (503, or 429 with `failClosedStatus: 429`). Degraded answers carry `Tollgate-Degraded`.
   */
  readonly failureMode?: FailureMode;
  /** The fewest processes sharing the store, for `failureMode: 'local'` (a floor of the count of processes seen alive on Redis). Default 1. */
  readonly expectedNodes?: number;
  /** Longest wait for the store per request, in ms. Default 50 (or the store's `deadlineMs`). */
  readonly deadlineMs?: number;
  /** The circuit breaker around the store, or `false`. */
  readonly breaker?: BreakerOptions | false;
  /** The status of a request refused by `failureMode: 'closed'`: 503 (default) or 429. */
  readonly failClosedStatus?: 429 | 503;
  /** The local over-limit cache (off by default): `true`, or `{ maxKeys }`. */
  readonly overLimitCache?: boolean | OverLimitCacheOptions;
  /** Told about store failures (default: one line on stderr at most every 10 s). */
  readonly onError?: (error: unknown, req: Req) => void;
  /** Trusted proxies and IPv6 subnet for the client IP (see `ClientIpOptions`). */
  readonly trustProxy?: ClientIpOptions['trustProxy'];
  readonly proxyHeader?: ClientIpOptions['proxyHeader'];
  readonly ipv6Subnet?: number;
  /** Decision time in epoch ms (tests, simulations); default: the store's clock. */
  readonly clock?: () => number;
  /**
   * Cost known after the response (settle.ts): `cost` is reserved as the estimate, and this says
   * what the request actually took once its response is done (node:http / Express / Connect).
   */
  readonly settle?: SettleHook<Req>;
  /** At most `limit` requests of a caller in flight at once, besides the rate limits or alone (concurrency.ts). */
  readonly concurrency?: ConcurrencyOptions<Req>;
}

const CORE_OPTIONS = [
  'store', 'policy', 'limits', 'name', 'rules', 'domain', 'descriptors', 'key', 'cost', 'skip', 'headers', 'message',
  'shaping', 'failureMode', 'expectedNodes', 'deadlineMs', 'breaker', 'failClosedStatus', 'overLimitCache', 'onError', 'trustProxy', 'proxyHeader', 'ipv6Subnet', 'clock',
  'settle',
  'concurrency',
];

const LIMIT_FIELDS: readonly string[] = ['name', 'policy', 'key', 'failureMode', 'lease', 'syncIntervalMs'];
/** Longest limit name (it prefixes the limit's counter keys). */
const MAX_LIMIT_NAME = 128;

/** A limit of a middleware, validated; `prefix` (`name` + separator) starts every store key. */
export interface PreparedLimit<Req> {
  readonly name: string;
  readonly policy: CompiledPolicy;
  readonly key: KeyFunction<Req> | undefined;
  readonly prefix: string;
  /** The limit's own call options (failure mode, lease, local-first), when it has any. */
  readonly callOptions: LimitCallOptions | undefined;
}

/** What a limit adds to each of its limiter calls. */
export interface LimitCallOptions {
  readonly failureMode?: FailureMode;
  readonly lease?: number;
  readonly syncIntervalMs?: number;
}

/** Shaping, derived: ms between two requests of the bucket, and how many queued requests skip the wait. */
export interface PreparedShaping {
  readonly interval: number;
  readonly free: number;
}

/**
 * Refuses anything but a plain object of known option names. An express-rate-limit name
 * (`windowMs`, `max`, `handler`, ...) is refused with what Tollgate takes instead; a misspelt
 * Tollgate name with the name it is closest to, else with every name.
 */
export function checkOptionNames(options: unknown, adapterOptions: readonly string[]): asserts options is CoreOptions<unknown> {
  const known = [...CORE_OPTIONS, ...adapterOptions];
  if (typeof options === 'object' && options !== null && !Array.isArray(options)) {
    const hints = foreignOptionHints(options, known);
    if (hints !== undefined) throw new InvalidOptionError(`rate limit: ${hints}`);
    const unknown = unknownName(options, known);
    const suggestion = unknown === undefined ? undefined : closestMatch(unknown, known);
    if (suggestion !== undefined) throw new InvalidOptionError(`unknown rate limit option ${JSON.stringify(unknown)}; did you mean ${JSON.stringify(suggestion)}?`);
    checkSharedNames(options as CoreOptions<unknown>);
  }
  checkOptions('rate limit', options, known, "{ policy: { algorithm: 'fixed-window', limit: 100, window: '1m' } }", 'rate limit option');
}

/**
 * Options express-rate-limit also has, under the same name, given in express-rate-limit's shape:
 * refused with what Tollgate takes (their Tollgate shapes are checked where they are read).
 */
function checkSharedNames(options: CoreOptions<unknown>): void {
  const { headers, message, ipv6Subnet } = options as { headers?: unknown; message?: unknown; ipv6Subnet?: unknown };
  if (typeof headers === 'boolean') {
    throw new InvalidOptionError(`headers: ${headers} is express-rate-limit's old name for legacyHeaders; Tollgate takes headers: ${headers ? "'legacy'" : "'none'"} (or 'ietf', 'both')`);
  }
  if (message !== undefined && typeof message !== 'string') {
    throw new InvalidOptionError(
      `message must be a string (the 429 body's message), got ${describeValue(message)}; for a body of your own, as express-rate-limit's message object or function gave, answer in onLimited`,
    );
  }
  if (ipv6Subnet === false || typeof ipv6Subnet === 'function') {
    throw new InvalidOptionError(
      `ipv6Subnet must be a prefix length from 32 to 64, got ${describeValue(ipv6Subnet)} (express-rate-limit's shape); Tollgate keys an IPv6 client by a fixed prefix (default 56); for any other key, give key: (req, view) => ...`,
    );
  }
  const storeHint = foreignStoreHint(options.store);
  if (storeHint !== undefined) throw new InvalidOptionError(storeHint);
}

/** Which of `policy`, `limits` and `rules` is used: exactly one must be given. */
export function limitMode(options: CoreOptions<unknown>): 'policy' | 'limits' | 'rules' | 'concurrency' {
  const given = (['policy', 'limits', 'rules'] as const).filter((name) => options[name] !== undefined);
  // Concurrency alone: requests in flight are limited, their rate is not.
  if (given.length === 0 && options.concurrency !== undefined && options.domain === undefined && options.descriptors === undefined) return 'concurrency';
  if (given.length !== 1) {
    throw new InvalidOptionError(
      `give exactly one of policy (one limit), limits (several, decided together) or rules (+ domain); got ${given.length === 0 ? 'none' : 'more than one'}`,
    );
  }
  const mode = given[0]!;
  if (mode === 'rules') {
    const rules = options.rules as unknown as { current?: unknown } | null;
    if (typeof rules !== 'object' || rules === null || !(rules.current instanceof RuleSet)) {
      throw new InvalidOptionError(`rules must be a RulesHolder or RuleSet (see loadRules / compileRules), got ${describeValue(options.rules)}`);
    }
    if (typeof options.domain !== 'string' || options.domain === '') {
      throw new InvalidOptionError(`rules need the domain to check: add domain: 'my-api' (a domain of the rules files)`);
    }
    if (options.shaping !== undefined) throw new InvalidOptionError('shaping works with one leaky-bucket policy, not with rules');
  } else if (options.domain !== undefined || options.descriptors !== undefined) {
    throw new InvalidOptionError('domain and descriptors only apply with rules; with policy or limits, use key');
  }
  return mode;
}

export function checkStore(store: unknown): Store | undefined {
  if (store !== undefined && (typeof store !== 'object' || store === null || typeof (store as Store).consume !== 'function')) {
    throw new InvalidOptionError(`store must be a Tollgate store (memoryStore() or redisStore()), got ${describeValue(store)}`);
  }
  return store as Store | undefined;
}

export function checkHeaderStyle(style: unknown): HeaderStyle {
  if (style === undefined) return 'legacy';
  if (!HEADER_STYLES.includes(style as HeaderStyle)) {
    throw new InvalidOptionError(`headers must be one of ${HEADER_STYLES.map((s) => `'${s}'`).join(', ')}, got ${describeValue(style)}`);
  }
  return style as HeaderStyle;
}

export function checkMessage(message: unknown): string | undefined {
  if (message !== undefined && typeof message !== 'string') {
    throw new InvalidOptionError(`message must be a string, got ${describeValue(message)}`);
  }
  return message;
}

export function prepareLimits<Req>(limits: unknown, name: unknown): PreparedLimit<Req>[] {
  if (!Array.isArray(limits) || limits.length === 0) {
    const got = Array.isArray(limits) ? 'an empty array' : describeValue(limits);
    throw new InvalidOptionError(`limits must be a non-empty array (at most ${MAX_LIMITS_PER_CHECK}) of { name, policy, key? }, got ${got}`);
  }
  if (limits.length > MAX_LIMITS_PER_CHECK) {
    throw new InvalidOptionError(`limits has ${limits.length} entries; at most ${MAX_LIMITS_PER_CHECK} limits are decided together`);
  }
  if (name !== undefined) throw new InvalidOptionError('name names the single policy; with limits, give each limit its own name');
  const prepared = limits.map((spec: unknown, index) => {
    if (typeof spec !== 'object' || spec === null) throw new InvalidOptionError(`limits[${index}] must be { name, policy, key? }, got ${describeValue(spec)}`);
    return prepareLimit(spec as LimitSpec<Req>, `limits[${index}]`);
  });
  const names = new Set<string>();
  for (const limit of prepared) {
    if (names.has(limit.name)) throw new InvalidOptionError(`two limits are named ${JSON.stringify(limit.name)}: give each a distinct name (it namespaces their counters)`);
    names.add(limit.name);
  }
  return prepared;
}

export function prepareLimit<Req>(spec: Partial<LimitSpec<Req>>, where: string): PreparedLimit<Req> {
  const unknown = unknownName(spec, LIMIT_FIELDS);
  if (unknown !== undefined) throw new InvalidOptionError(`${where}: unknown field ${JSON.stringify(unknown)}; a limit is { name, policy, key?, failureMode?, lease?, syncIntervalMs? }`);
  let policy: CompiledPolicy;
  try {
    policy = compilePolicy(spec.policy as Policy);
  } catch (error) {
    throw new InvalidOptionError(`${where}: ${(error as Error).message}`);
  }
  const name = spec.name ?? `${policy.limit}-per-${compactWindow(policy.windowMs)}`;
  if (typeof name !== 'string' || name === '' || name.length > MAX_LIMIT_NAME) {
    const got = typeof name === 'string' && name.length > MAX_LIMIT_NAME ? `${name.length} characters` : describeValue(spec.name);
    throw new InvalidOptionError(`${where}: name must be a non-empty string of at most ${MAX_LIMIT_NAME} characters, got ${got}`);
  }
  return { name, policy, key: optionalFunction(spec.key, `${where}.key`), prefix: `${name}|`, callOptions: limitCallOptions(spec, policy, where) };
}

function limitCallOptions(spec: Pick<Partial<LimitSpec<never>>, 'failureMode' | 'lease' | 'syncIntervalMs'>, policy: CompiledPolicy, where: string): LimitCallOptions | undefined {
  const options: { failureMode?: FailureMode; lease?: number; syncIntervalMs?: number } = {};
  if (spec.failureMode !== undefined) options.failureMode = checkFailureMode(spec.failureMode, `${where}.failureMode`);
  if (spec.lease !== undefined) {
    options.lease = checkLease(spec.lease, `${where}.lease`);
    checkLeasable(policy, `${where}.lease`);
  }
  if (spec.syncIntervalMs !== undefined) {
    options.syncIntervalMs = checkSyncInterval(spec.syncIntervalMs, `${where}.syncIntervalMs`);
    if (options.lease !== undefined) throw new InvalidOptionError(`${where}: give lease or syncIntervalMs (local-first), not both`);
    if (!countsInWindows(policy)) throw new InvalidOptionError(`${where}.syncIntervalMs (local-first) needs a fixed-window or sliding-window policy of precision 1; for ${describeState(policy)} ${policy.algorithm === 'sliding-window' ? 'use lease instead' : 'decide exactly (no lease either: a lease keeps fixed-window and sliding-window caps only)'}`);
  }
  return Object.keys(options).length === 0 ? undefined : options;
}

/**
 * Shaping needs one leaky-bucket limit. Its queue is what passes at once (`delayAfter`) plus what
 * can wait at most `maxDelay`, capped by the policy's burst; returns the limit to use in its place.
 */
export function prepareShaping<Req>(shaping: unknown, limits: readonly PreparedLimit<Req>[]): { limit: PreparedLimit<Req> | undefined; shaping: PreparedShaping } {
  if (shaping === undefined) return { limit: undefined, shaping: { interval: 0, free: 0 } };
  if (typeof shaping !== 'object' || shaping === null) {
    throw new InvalidOptionError(`shaping must be { maxDelay: '500ms', delayAfter?: 0 }, got ${describeValue(shaping)}`);
  }
  const only = limits.length === 1 ? limits[0]! : undefined;
  if (only === undefined || only.policy.algorithm !== 'leaky-bucket') {
    throw new InvalidOptionError(`shaping needs one policy with algorithm 'leaky-bucket' (the queue whose turn a request waits for)`);
  }
  const { maxDelay: maxDelayOption, delayAfter: delayAfterOption } = shaping as ShapingOptions;
  const maxDelay = checkDuration(maxDelayOption, 'shaping.maxDelay');
  const delayAfter = checkWholeNumber(delayAfterOption ?? 0, { name: 'shaping.delayAfter', min: 0, meaning: 'requests let through without waiting' });
  const policy = only.policy;
  const interval = policy.windowMs / policy.limit;
  const shaped = shapedLeakyBucket(policy, maxDelay, delayAfter);
  const limit = shaped === undefined ? undefined : { ...only, policy: shaped };
  return { limit, shaping: { interval, free: delayAfter } };
}

export function checkFailureMode(mode: unknown, where = 'failureMode'): FailureMode {
  if (mode === undefined) return 'local';
  const checked = checkMode(mode, where);
  if (checked === 'throw') throw new InvalidOptionError(`${where} 'throw' is for library calls; the middleware answers every request: take 'open', 'closed' or 'local'`);
  return checked;
}

export function checkFailClosedStatus(status: unknown): 429 | 503 {
  if (status === undefined || status === 503 || status === 429) return status ?? 503;
  throw new InvalidOptionError(`failClosedStatus must be 503 (the default: the limiter is unavailable) or 429 (too many requests), got ${describeValue(status)}`);
}

export function checkCostOption<Req>(cost: unknown): CostOption<Req> {
  if (cost === undefined) return 1;
  if (typeof cost === 'function') return cost as CostOption<Req>;
  return checkCost(cost);
}

export function checkCost(cost: unknown): number {
  return checkWholeNumber(cost, { name: 'cost', min: 0, meaning: '0 reports the quota without spending it' });
}
