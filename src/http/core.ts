/**
 * The framework-neutral heart of the middleware: options are validated once, then each request is
 * turned into store keys, decided, and answered with a {@link Verdict}. The adapters (node:http /
 * Express / Connect, Fastify, Hono) only translate requests into a {@link RequestView} and verdicts
 * into responses.
 *
 * The memory store answers synchronously, so a request that needs nothing asynchronous (the
 * default IP key, a memory store) is decided without a promise: that is most of the overhead budget.
 */
import { createHash } from 'node:crypto';
import type { Decision } from '../decision.js';
import { currentTime } from '../clock.js';
import { parseDuration } from '../duration.js';
import { InvalidOptionError, describeValue } from '../errors.js';
import { createLimiter, MAX_LIMITS_PER_CHECK, type Limiter } from '../limiter.js';
import { compilePolicy, type CompiledPolicy, type Policy } from '../policy.js';
import { check, type CheckEngine, type CheckResult, type RateLimitDescriptor } from '../rules/check.js';
import { RuleSet, type RuleSource } from '../rules/ruleset.js';
import { memoryStore } from '../store/memory.js';
import type { MaybePromise, Store, StoreRequest } from '../store/types.js';
import { checkReports } from './headers.js';
import { clientIp, type ClientIp, type ClientIpOptions, type HeaderGetter } from './identity.js';
import { HEADER_STYLES, type HeaderStyle, type LimitReport } from './report.js';

/** What the middleware sees of a request, whatever the framework. */
export interface RequestView {
  readonly method: string;
  /** The request target's path, still percent-encoded, without the query. */
  readonly path: string;
  /** The socket peer's address. */
  readonly remoteAddress: string | undefined;
  /** A header by lower-case name; repeated headers joined with `, `. */
  header(name: string): string | undefined;
  /** The client's address key as the middleware's trusted-proxy settings see it (`ip:1.2.3.4`, `ip:2001:db8::/56`). */
  readonly ipKey: string;
  /** The client's address (IPv6 reduced to its configured subnet), for rule descriptors. */
  readonly ip: string;
}

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
  /** When the store fails: `open` (default) lets requests through, `closed` answers 503. */
  readonly failureMode?: 'open' | 'closed';
  /** Told about store failures (default: one line on stderr at most every 10 s). */
  readonly onError?: (error: unknown, req: Req) => void;
  /** Trusted proxies and IPv6 subnet for the client IP (see `ClientIpOptions`). */
  readonly trustProxy?: ClientIpOptions['trustProxy'];
  readonly proxyHeader?: ClientIpOptions['proxyHeader'];
  readonly ipv6Subnet?: number;
  /** Decision time in epoch ms (tests, simulations); default: the store's clock. */
  readonly clock?: () => number;
}

/** The outcome for one request. */
export interface Verdict {
  /** Undefined: the request was skipped or no limit applied (nothing to report). */
  readonly reports: readonly LimitReport[] | undefined;
  readonly allowed: boolean;
  /** Shaping: how long to hold an admitted request before passing it on. */
  readonly delayMs: number;
  /** The store failed and `failureMode` is `closed`: answer 503. */
  readonly unavailable?: boolean;
  /** The decision time the reports are relative to (epoch ms). */
  readonly now: number;
}

const SKIPPED: Verdict = Object.freeze({ reports: undefined, allowed: true, delayMs: 0, now: 0 });
const UNAVAILABLE: Verdict = Object.freeze({ reports: undefined, allowed: false, delayMs: 0, unavailable: true, now: 0 });

const CORE_OPTIONS = new Set([
  'store', 'policy', 'limits', 'name', 'rules', 'domain', 'descriptors', 'key', 'cost', 'skip', 'headers', 'message',
  'shaping', 'failureMode', 'onError', 'trustProxy', 'proxyHeader', 'ipv6Subnet', 'clock',
]);

/** Store keys longer than this are hashed (store keys are capped at 1 KiB). */
const MAX_PLAIN_KEY = 512;

interface PreparedLimit<Req> {
  readonly name: string;
  readonly policy: CompiledPolicy;
  readonly key: KeyFunction<Req> | undefined;
  /** `name` + separator, prefixed to every identity. */
  readonly prefix: string;
}

/** A validated middleware configuration; `decide` is called once per request. */
export class HttpRateLimiter<Req> {
  readonly headerStyle: HeaderStyle;
  readonly message: string | undefined;
  readonly clientIp: ClientIp;
  /** Whether the client IP depends on headers (trusted proxies): if not, views skip the header getter. */
  readonly ipReadsHeaders: boolean;
  readonly store: Store;
  private readonly ownsStore: boolean;
  private readonly limits: readonly PreparedLimit<Req>[];
  private readonly defaultKey: KeyFunction<Req> | undefined;
  private readonly cost: CostOption<Req>;
  private readonly skip: CoreOptions<Req>['skip'];
  private readonly failClosed: boolean;
  private readonly onError: (error: unknown, req: Req) => void;
  private readonly rulesLimiter: Limiter | undefined;
  private readonly rules: RuleSource | undefined;
  private readonly peekEngine: CheckEngine | undefined;
  private readonly domain: string;
  private readonly descriptors: CoreOptions<Req>['descriptors'];
  /** Shaping: ms between two requests of the bucket, and how many queued requests skip the wait. */
  private readonly shapingInterval: number;
  private readonly shapingFree: number;
  private readonly clock: (() => number) | undefined;

  constructor(options: CoreOptions<Req>, adapterOptions: readonly string[] = []) {
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw new InvalidOptionError(`rate limit options must be an object like { policy: { algorithm: 'fixed-window', limit: 100, window: '1m' } }, got ${describeValue(options)}`);
    }
    for (const name of Object.keys(options)) {
      if (!CORE_OPTIONS.has(name) && !adapterOptions.includes(name)) {
        throw new InvalidOptionError(`unknown rate limit option ${JSON.stringify(name)}; the options are ${[...CORE_OPTIONS, ...adapterOptions].join(', ')}`);
      }
    }
    this.clientIp = clientIp({ trustProxy: options.trustProxy, proxyHeader: options.proxyHeader, ipv6Subnet: options.ipv6Subnet });
    this.ipReadsHeaders = options.trustProxy !== undefined && options.trustProxy !== false;
    this.headerStyle = options.headers ?? 'legacy';
    if (!HEADER_STYLES.includes(this.headerStyle)) {
      throw new InvalidOptionError(`headers must be one of ${HEADER_STYLES.map((s) => `'${s}'`).join(', ')}, got ${describeValue(options.headers)}`);
    }
    if (options.message !== undefined && typeof options.message !== 'string') {
      throw new InvalidOptionError(`message must be a string, got ${describeValue(options.message)}`);
    }
    this.message = options.message;
    this.failClosed = checkFailureMode(options.failureMode);
    this.onError = optionalFunction(options.onError, 'onError') ?? logStoreFailure(this.failClosed);
    this.defaultKey = optionalFunction(options.key, 'key');
    this.skip = optionalFunction(options.skip, 'skip');
    this.cost = checkCostOption(options.cost);
    this.descriptors = optionalFunction(options.descriptors, 'descriptors');
    this.clock = optionalFunction(options.clock, 'clock');
    if (options.store !== undefined && (typeof options.store !== 'object' || options.store === null || typeof options.store.consume !== 'function')) {
      throw new InvalidOptionError(`store must be a Tollgate store (memoryStore() or redisStore()), got ${describeValue(options.store)}`);
    }
    this.ownsStore = options.store === undefined;
    this.store = options.store ?? memoryStore();

    const modes = [options.policy !== undefined, options.limits !== undefined, options.rules !== undefined].filter(Boolean).length;
    if (modes !== 1) {
      throw new InvalidOptionError(
        `give exactly one of policy (one limit), limits (several, decided together) or rules (+ domain); got ${modes === 0 ? 'none' : 'more than one'}`,
      );
    }
    if (options.rules !== undefined) {
      if (typeof options.rules !== 'object' || options.rules === null || !(options.rules.current instanceof RuleSet)) {
        throw new InvalidOptionError(`rules must be a RulesHolder or RuleSet (see loadRules / compileRules), got ${describeValue(options.rules)}`);
      }
      if (typeof options.domain !== 'string' || options.domain === '') {
        throw new InvalidOptionError(`rules need the domain to check: add domain: 'my-api' (a domain of the rules files)`);
      }
      if (options.shaping !== undefined) throw new InvalidOptionError('shaping works with one leaky-bucket policy, not with rules');
      this.rulesLimiter = createLimiter({ store: this.store, rules: options.rules });
      this.rules = options.rules;
      const limiter = this.rulesLimiter;
      this.peekEngine = {
        limit: (key, policy, callOptions) => limiter.peek(key, policy, callOptions),
        limitAll: (requests, callOptions) => Promise.all(requests.map((r) => limiter.peek(r.key, r.policy, { ...callOptions, cost: r.cost ?? 1 }))),
      };
      this.domain = options.domain;
      this.limits = [];
    } else {
      if (options.domain !== undefined || options.descriptors !== undefined) {
        throw new InvalidOptionError('domain and descriptors only apply with rules; with policy or limits, use key');
      }
      this.domain = '';
      this.limits = options.policy !== undefined ? [prepareLimit({ name: options.name, policy: options.policy }, 'policy')] : prepareLimits(options.limits, options.name);
    }
    [this.shapingInterval, this.shapingFree] = this.prepareShaping(options.shaping);
  }

  /** Decides `req`. Throws (or rejects) only when a user callback does. */
  decide(req: Req, view: RequestView): MaybePromise<Verdict> {
    if (this.skip !== undefined) {
      const skipped = this.skip(req, view);
      if (isPromise(skipped)) return skipped.then((yes) => (yes ? SKIPPED : this.decideCost(req, view)));
      if (skipped) return SKIPPED;
    }
    return this.decideCost(req, view);
  }

  /** Releases the store when the middleware created it. */
  async close(): Promise<void> {
    if (this.ownsStore) await this.store.close();
  }

  private decideCost(req: Req, view: RequestView): MaybePromise<Verdict> {
    const cost = typeof this.cost === 'number' ? this.cost : this.cost(req, view);
    if (isPromise(cost)) return cost.then((value) => this.decideWith(req, view, checkCost(value)));
    return this.decideWith(req, view, typeof this.cost === 'number' ? cost : checkCost(cost));
  }

  private decideWith(req: Req, view: RequestView, cost: number): MaybePromise<Verdict> {
    if (this.rulesLimiter !== undefined) return this.decideRules(req, view, cost);
    if (this.limits.length === 1) {
      const limit = this.limits[0]!;
      const identity = this.identity(limit, req, view);
      if (isPromise(identity)) return identity.then((key) => this.decideOne(limit, key, cost, req));
      return this.decideOne(limit, identity, cost, req);
    }
    const identities = this.limits.map((limit) => this.identity(limit, req, view));
    if (identities.some(isPromise)) return Promise.all(identities).then((keys) => this.decideMany(keys, cost, req));
    return this.decideMany(identities as Array<string | undefined>, cost, req);
  }

  private identity(limit: PreparedLimit<Req>, req: Req, view: RequestView): MaybePromise<string | undefined> {
    const key = limit.key ?? this.defaultKey;
    return key === undefined ? view.ipKey : key(req, view);
  }

  private decideOne(limit: PreparedLimit<Req>, identity: string | undefined, cost: number, req: Req): MaybePromise<Verdict> {
    if (identity === undefined) return SKIPPED;
    const storeKey = this.storeKey(limit, identity);
    const now = this.clock?.();
    let decision: MaybePromise<Decision>;
    try {
      decision = cost === 0 ? this.store.peek(storeKey, limit.policy, 1, now) : this.store.consume(storeKey, limit.policy, cost, now);
    } catch (error) {
      return this.failed(error, req);
    }
    if (isPromise(decision)) {
      return decision.then((d) => this.oneVerdict(limit, storeKey, cost === 0 ? free(d) : d, now), (error: unknown) => this.failed(error, req));
    }
    return this.oneVerdict(limit, storeKey, cost === 0 ? free(decision) : decision, now);
  }

  private oneVerdict(limit: PreparedLimit<Req>, storeKey: string, decision: Decision, now: number | undefined): Verdict {
    const report = toReport(limit, storeKey, decision);
    const delayMs = decision.allowed && decision.delay !== undefined ? this.shapingDelay(decision.delay) : 0;
    return { reports: [report], allowed: decision.allowed, delayMs, now: now ?? currentTime() };
  }

  private decideMany(identities: ReadonlyArray<string | undefined>, cost: number, req: Req): MaybePromise<Verdict> {
    const applied: Array<PreparedLimit<Req>> = [];
    const requests: StoreRequest[] = [];
    for (let i = 0; i < identities.length; i++) {
      const identity = identities[i];
      if (identity === undefined) continue;
      const limit = this.limits[i]!;
      applied.push(limit);
      requests.push({ key: this.storeKey(limit, identity), policy: limit.policy, cost: Math.max(cost, 1) });
    }
    if (requests.length === 0) return SKIPPED;
    const now = this.clock?.();
    let decisions: MaybePromise<Decision[]>;
    try {
      decisions = this.store.consumeAll(requests, now, cost > 0);
    } catch (error) {
      return this.failed(error, req);
    }
    const verdict = (decided: Decision[]): Verdict => {
      const list = cost === 0 ? decided.map(free) : decided;
      const reports = list.map((decision, i) => toReport(applied[i]!, requests[i]!.key, decision));
      return { reports, allowed: list.every((decision) => decision.allowed), delayMs: 0, now: now ?? currentTime() };
    };
    if (isPromise(decisions)) return decisions.then(verdict, (error: unknown) => this.failed(error, req));
    return verdict(decisions);
  }

  private async decideRules(req: Req, view: RequestView, cost: number): Promise<Verdict> {
    const descriptors = this.descriptors === undefined ? [{ entries: [{ key: 'remote_address', value: view.ip }] }] : await this.descriptors(req, view);
    const clockNow = this.clock?.();
    const request = { domain: this.domain, descriptors, hits: Math.max(cost, 1), ...(clockNow === undefined ? {} : { now: clockNow }) };
    let result: CheckResult;
    try {
      // Cost 0 looks without spending: the same check, on an engine that only peeks.
      result = await (cost === 0 ? check(this.peekEngine!, this.rules!.current, request) : this.rulesLimiter!.check(request));
    } catch (error) {
      // A bad descriptor list is the caller's bug, not the store's: let it surface.
      if (error instanceof Error && (error as { code?: string }).code === 'ERR_TOLLGATE_INVALID_CHECK') throw error;
      return this.failed(error, req);
    }
    const now = clockNow ?? Date.now();
    const reports = checkReports(result, now);
    if (cost === 0) return { reports: reports.length === 0 ? undefined : reports.map(freeReport), allowed: true, delayMs: 0, now };
    return { reports: reports.length === 0 ? undefined : reports, allowed: result.overallCode === 'OK', delayMs: 0, now };
  }

  private storeKey(limit: PreparedLimit<Req>, identity: string): string {
    if (typeof identity !== 'string') {
      throw new InvalidOptionError(`key functions must return a string or undefined, got ${describeValue(identity)}`);
    }
    const key = limit.prefix + identity;
    return key.length <= MAX_PLAIN_KEY ? key : limit.prefix + '#' + createHash('sha256').update(identity).digest('base64url');
  }

  private failed(error: unknown, req: Req): Verdict {
    try {
      this.onError(error, req);
    } catch {
      // A failing error hook must not turn a store outage into a crash.
    }
    return this.failClosed ? UNAVAILABLE : SKIPPED;
  }

  private shapingDelay(delay: number): number {
    if (this.shapingInterval === 0) return 0;
    return Math.max(0, Math.ceil(delay - this.shapingFree * this.shapingInterval));
  }

  private prepareShaping(shaping: ShapingOptions | undefined): [number, number] {
    if (shaping === undefined) return [0, 0];
    if (typeof shaping !== 'object' || shaping === null) {
      throw new InvalidOptionError(`shaping must be { maxDelay: '500ms', delayAfter?: 0 }, got ${describeValue(shaping)}`);
    }
    const only = this.limits.length === 1 ? this.limits[0]! : undefined;
    if (only === undefined || only.policy.algorithm !== 'leaky-bucket') {
      throw new InvalidOptionError(`shaping needs one policy with algorithm 'leaky-bucket' (the queue whose turn a request waits for)`);
    }
    const maxDelay = parseDuration(shaping.maxDelay);
    if (typeof maxDelay === 'string') throw new InvalidOptionError(`shaping.maxDelay ${maxDelay}`);
    const delayAfter = shaping.delayAfter ?? 0;
    if (!Number.isSafeInteger(delayAfter) || delayAfter < 0) {
      throw new InvalidOptionError(`shaping.delayAfter must be a whole number ≥ 0 (requests let through without waiting), got ${describeValue(shaping.delayAfter)}`);
    }
    const policy = only.policy;
    const interval = policy.windowMs / policy.limit;
    // The queue holds what can pass without waiting plus what can wait at most maxDelay.
    const queue = delayAfter + Math.floor(maxDelay / interval) + 1;
    if (queue < policy.burst) {
      (this.limits as PreparedLimit<Req>[])[0] = { ...only, policy: compilePolicy({ algorithm: 'leaky-bucket', limit: policy.limit, window: policy.windowMs, burst: queue, softPercent: policy.softPercent }) };
    }
    return [interval, delayAfter];
  }
}

/** A cost-0 request spends nothing and is never refused: report the quota as it stands (the peek was for one unit). */
function free(decision: Decision): Decision {
  return { ...decision, allowed: true, retryAfter: 0, remaining: decision.allowed ? decision.remaining + 1 : decision.remaining };
}

function freeReport(report: LimitReport): LimitReport {
  return { ...report, allowed: true, retryAfter: 0, remaining: report.allowed ? report.remaining + 1 : report.remaining };
}

function toReport<Req>(limit: PreparedLimit<Req>, storeKey: string, decision: Decision): LimitReport {
  return {
    name: limit.name,
    limit: decision.limit,
    windowMs: limit.policy.windowMs,
    remaining: decision.remaining,
    resetAt: decision.resetAt,
    allowed: decision.allowed,
    retryAfter: decision.retryAfter,
    partitionKey: storeKey,
  };
}

function prepareLimits<Req>(limits: unknown, name: unknown): PreparedLimit<Req>[] {
  if (!Array.isArray(limits) || limits.length === 0 || limits.length > MAX_LIMITS_PER_CHECK) {
    throw new InvalidOptionError(`limits must be a non-empty array (at most ${MAX_LIMITS_PER_CHECK}) of { name, policy, key? }, got ${describeValue(limits)}`);
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

function prepareLimit<Req>(spec: Partial<LimitSpec<Req>>, where: string): PreparedLimit<Req> {
  for (const field of Object.keys(spec)) {
    if (field !== 'name' && field !== 'policy' && field !== 'key') {
      throw new InvalidOptionError(`${where}: unknown field ${JSON.stringify(field)}; a limit is { name, policy, key? }`);
    }
  }
  let policy: CompiledPolicy;
  try {
    policy = compilePolicy(spec.policy as Policy);
  } catch (error) {
    throw new InvalidOptionError(`${where}: ${(error as Error).message}`);
  }
  const name = spec.name ?? `${policy.limit}-per-${formatWindow(policy.windowMs)}`;
  if (typeof name !== 'string' || name === '' || name.length > 128) {
    throw new InvalidOptionError(`${where}: name must be a non-empty string of at most 128 characters, got ${describeValue(spec.name)}`);
  }
  return { name, policy, key: optionalFunction(spec.key, `${where}.key`), prefix: `${name}|` };
}

function formatWindow(ms: number): string {
  for (const [size, unit] of [[604_800_000, 'w'], [86_400_000, 'd'], [3_600_000, 'h'], [60_000, 'm'], [1000, 's']] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

function checkFailureMode(mode: unknown): boolean {
  if (mode === undefined || mode === 'open') return false;
  if (mode === 'closed') return true;
  throw new InvalidOptionError(`failureMode must be 'open' (let requests through when the store fails) or 'closed' (answer 503), got ${describeValue(mode)}`);
}

function checkCostOption<Req>(cost: unknown): CostOption<Req> {
  if (cost === undefined) return 1;
  if (typeof cost === 'function') return cost as CostOption<Req>;
  return checkCost(cost);
}

function checkCost(cost: unknown): number {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
    throw new InvalidOptionError(`cost must be a whole number ≥ 0 (0 reports the quota without spending it), got ${describeValue(cost)}`);
  }
  return cost;
}

function optionalFunction<T>(value: T | undefined, name: string): T | undefined {
  if (value !== undefined && typeof value !== 'function') {
    throw new InvalidOptionError(`${name} must be a function, got ${describeValue(value)}`);
  }
  return value;
}

function isPromise<T>(value: MaybePromise<T>): value is Promise<T> {
  return typeof (value as Promise<T> | undefined)?.then === 'function';
}

let lastErrorLog = 0;
/** The default `onError`: one line on stderr at most every 10 s, saying what clients get meanwhile. */
function logStoreFailure(failClosed: boolean): (error: unknown) => void {
  const outcome = failClosed ? "requests are answered 503 (failureMode 'closed')" : "requests pass unchecked (failureMode 'open')";
  return (error) => {
    const now = Date.now();
    if (now - lastErrorLog < 10_000) return;
    lastErrorLog = now;
    process.stderr.write(`tollgate: the rate limit store failed, ${outcome}: ${(error as Error)?.message ?? String(error)}\n`);
  };
}

/** For a client IP that ignores headers: no per-request closure. */
const NO_HEADERS: HeaderGetter = () => undefined;

/**
 * The parts every view shares: the client IP is computed on first use, and the header getter is
 * made only when something asks for it (the default IP key without trusted proxies never does).
 */
export abstract class LazyRequestView implements RequestView {
  private cachedIpKey: string | undefined;
  private cachedHeader: HeaderGetter | undefined;

  constructor(
    private readonly limiter: { readonly clientIp: ClientIp; readonly ipReadsHeaders: boolean },
    readonly remoteAddress: string | undefined,
  ) {}

  abstract readonly method: string;
  abstract readonly path: string;
  protected abstract readHeader(name: string): string | undefined;

  get header(): HeaderGetter {
    return (this.cachedHeader ??= (name) => this.readHeader(name));
  }

  get ipKey(): string {
    return (this.cachedIpKey ??= this.limiter.clientIp.key(this.remoteAddress, this.limiter.ipReadsHeaders ? this.header : NO_HEADERS));
  }

  get ip(): string {
    return this.ipKey.slice(3);
  }
}

/** A {@link RequestView} over node's request line and header object. */
export class NodeRequestView extends LazyRequestView {
  constructor(
    limiter: { readonly clientIp: ClientIp; readonly ipReadsHeaders: boolean },
    readonly method: string,
    private readonly url: string,
    private readonly headers: Readonly<Record<string, string | string[] | undefined>>,
    remoteAddress: string | undefined,
  ) {
    super(limiter, remoteAddress);
  }

  get path(): string {
    const query = this.url.indexOf('?');
    return query === -1 ? this.url : this.url.slice(0, query);
  }

  protected readHeader(name: string): string | undefined {
    const value = this.headers[name];
    return Array.isArray(value) ? value.join(', ') : value;
  }
}
