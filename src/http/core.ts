/**
 * The framework-neutral heart of the middleware: options are validated once (options.ts), then each
 * request is turned into keys and decided by a {@link Limiter} — the same engine as every other
 * caller, so a limit of 0, a clock, a cost of 0 mean the same here as everywhere — and answered with
 * a {@link Verdict}. The adapters (node:http / Express / Connect, Fastify, Hono) only translate
 * requests into a {@link RequestView} and verdicts into responses (verdict.ts).
 *
 * The memory store answers synchronously, so a request that needs nothing asynchronous (the
 * default IP key, a memory store) is decided without a promise: that is most of the overhead budget.
 */
import { createHash } from 'node:crypto';
import type { Decision } from '../decision.js';
import { InvalidOptionError, StoreUnavailableError, describeValue } from '../errors.js';
import { DEGRADED_REASON, degradedReasonOf, type DegradedReason, type FailureMode, type LimitRequest } from '../limiter/index.js';
import type { CheckResult } from '../rules/check.js';
import { createLimiter, type Limiter } from '../rules/create-limiter.js';
import { MemoryStore, memoryStore } from '../store/memory.js';
import type { MaybePromise, Store } from '../store/types.js';
import { optionalFunction } from '../options.js';
import { requestSlots, type RequestSlots } from './concurrency.js';
import { checkReports } from './headers.js';
import { clientIp, type ClientIp } from './identity/index.js';
import {
  checkCost,
  checkCostOption,
  checkFailClosedStatus,
  checkFailureMode,
  checkHeaderStyle,
  checkMessage,
  checkOptionNames,
  checkStore,
  limitMode,
  prepareLimit,
  prepareLimits,
  prepareShaping,
  type CoreOptions,
  type CostOption,
  type PreparedLimit,
  type PreparedShaping,
} from './options.js';
import type { HeaderStyle, LimitReport } from './report.js';
import type { Verdict } from './verdict.js';
import type { ClientIpSettings, RequestView } from './view.js';
import { ResponseSettler, checkSettleHook } from './settle.js';

export type { CoreOptions, CostOption, KeyFunction, LimitSpec, ShapingOptions } from './options.js';
export type { Verdict } from './verdict.js';
export { LazyRequestView, NodeRequestView, type RequestView } from './view.js';

const SKIPPED: Verdict = Object.freeze({ reports: undefined, allowed: true, delayMs: 0, now: 0 });
/** Skipped by the `skip` option: no concurrency slot either. */
const SKIPPED_BY_OPTION: Verdict = Object.freeze({ ...SKIPPED, skipped: true as const });
const UNAVAILABLE: Verdict = Object.freeze({ reports: undefined, allowed: false, delayMs: 0, unavailable: true, now: 0 });

/** Store keys longer than this are hashed (store keys are capped at 1 KiB). */
const MAX_PLAIN_KEY = 512;

/** A validated middleware configuration; `decide` is called once per request. */
export class HttpRateLimiter<Req> implements ClientIpSettings {
  readonly headerStyle: HeaderStyle;
  readonly message: string | undefined;
  readonly clientIp: ClientIp;
  /** Whether the client IP depends on headers (trusted proxies): if not, views skip the header getter. */
  readonly ipReadsHeaders: boolean;
  readonly store: Store;
  /** Every decision of this middleware goes through it. */
  readonly limiter: Limiter;
  private readonly ownsStore: boolean;
  private readonly limits: readonly PreparedLimit<Req>[];
  private readonly defaultKey: CoreOptions<Req>['key'];
  private readonly cost: CostOption<Req>;
  private readonly skip: CoreOptions<Req>['skip'];
  private readonly failureMode: FailureMode;
  private readonly failClosedStatus: 429 | 503;
  private readonly onError: (error: unknown, req: Req) => void;
  private readonly rulesMode: boolean;
  private readonly domain: string;
  private readonly descriptors: CoreOptions<Req>['descriptors'];
  private readonly shaping: PreparedShaping;
  /** With the `settle` option: reserves each request's estimate and settles it after the response (settle.ts). */
  readonly settler: ResponseSettler<Req> | undefined;
  /** The `concurrency` option: a slot per request in flight, taken by the adapter once the rate limits admit it. */
  readonly slots: RequestSlots<Req> | undefined;
  /** The last store key built, and the limit and identity it was built from (storeKey). */
  private lastLimit: PreparedLimit<Req> | undefined;
  private lastIdentity: string | undefined;
  private lastStoreKey = '';

  constructor(options: CoreOptions<Req>, adapterOptions: readonly string[] = []) {
    checkOptionNames(options, adapterOptions);
    this.clientIp = clientIp({ trustProxy: options.trustProxy, proxyHeader: options.proxyHeader, ipv6Subnet: options.ipv6Subnet });
    this.ipReadsHeaders = options.trustProxy !== undefined && options.trustProxy !== false;
    this.headerStyle = checkHeaderStyle(options.headers);
    this.message = checkMessage(options.message);
    this.failureMode = checkFailureMode(options.failureMode);
    this.failClosedStatus = checkFailClosedStatus(options.failClosedStatus);
    this.onError = optionalFunction(options.onError, 'onError') ?? logStoreFailure(this.failureMode);
    this.defaultKey = optionalFunction(options.key, 'key');
    this.skip = optionalFunction(options.skip, 'skip');
    this.cost = checkCostOption(options.cost);
    this.descriptors = optionalFunction(options.descriptors, 'descriptors');
    const store = checkStore(options.store);
    this.ownsStore = store === undefined;
    this.store = store ?? memoryStore();
    // The memory store reads the process clock anyway; read directly, it costs no microtask per
    // request (each HTTP request runs in its own tick, so the shared reading is never shared).
    // Any other store keeps its own time (Redis TIME).
    const clock = optionalFunction(options.clock, 'clock') ?? (this.store instanceof MemoryStore ? processClock : undefined);

    const mode = limitMode(options as CoreOptions<unknown>);
    this.rulesMode = mode === 'rules';
    this.domain = this.rulesMode ? options.domain! : '';
    let limits: PreparedLimit<Req>[] = [];
    if (mode === 'policy') limits = [prepareLimit({ name: options.name, policy: options.policy }, 'policy')];
    if (mode === 'limits') limits = prepareLimits(options.limits, options.name);
    const shaped = prepareShaping(options.shaping, limits);
    if (shaped.limit !== undefined) limits = [shaped.limit];
    this.limits = limits;
    this.shaping = shaped.shaping;
    this.limiter = createLimiter({
      store: this.store,
      failureMode: this.failureMode,
      ...(options.expectedNodes !== undefined ? { expectedNodes: options.expectedNodes } : {}),
      ...(options.deadlineMs !== undefined ? { deadlineMs: options.deadlineMs } : {}),
      ...(options.breaker !== undefined ? { breaker: options.breaker } : {}),
      ...(options.overLimitCache !== undefined ? { overLimitCache: options.overLimitCache } : {}),
      ...(clock !== undefined ? { clock } : {}),
      ...(this.rulesMode ? { rules: options.rules! } : {}),
    });
    const settle = checkSettleHook<Req>(options.settle, mode, options.shaping, limits[0]?.policy);
    this.settler = settle === undefined ? undefined : new ResponseSettler(this.limiter, settle, (error, req) => this.tell(error, req));
    this.slots = requestSlots(options.concurrency, this.limiter, this.defaultKey, this.failClosedStatus);
  }

  /** Decides `req`. Throws (or rejects) only when a user callback does. */
  decide(req: Req, view: RequestView): MaybePromise<Verdict> {
    if (this.skip !== undefined) {
      const skipped = this.skip(req, view);
      if (isPromise(skipped)) return skipped.then((yes) => (yes ? SKIPPED_BY_OPTION : this.decideCost(req, view)));
      if (skipped) return SKIPPED_BY_OPTION;
    }
    return this.decideCost(req, view);
  }

  /** Releases the store when the middleware created it. */
  async close(): Promise<void> {
    if (this.ownsStore) await this.limiter.close();
  }

  private decideCost(req: Req, view: RequestView): MaybePromise<Verdict> {
    const cost = typeof this.cost === 'number' ? this.cost : this.cost(req, view);
    if (isPromise(cost)) return cost.then((value) => this.decideWith(req, view, checkCost(value)));
    return this.decideWith(req, view, typeof this.cost === 'number' ? cost : checkCost(cost));
  }

  private decideWith(req: Req, view: RequestView, cost: number): MaybePromise<Verdict> {
    if (this.rulesMode) return this.decideRules(req, view, cost);
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
    let decision: MaybePromise<Decision>;
    try {
      // Cost 0 looks without spending; cost 1 (the usual) allocates no call options.
      decision =
        this.settler !== undefined && cost > 0
          ? this.settler.reserve(req, storeKey, limit.policy, cost, limit.callOptions?.failureMode)
          : limit.callOptions !== undefined
          ? this.limiter.decide(storeKey, limit.policy, { cost: Math.max(cost, 1), ...limit.callOptions }, cost === 0 ? 'look' : 'limit')
          : cost === 0
            ? this.limiter.decide(storeKey, limit.policy, undefined, 'look')
            : this.limiter.decide(storeKey, limit.policy, cost === 1 ? undefined : { cost });
    } catch (error) {
      return this.failed(error, req);
    }
    if (isPromise(decision)) return decision.then((d) => this.oneVerdict(limit, storeKey, d, req), (error: unknown) => this.failed(error, req));
    return this.oneVerdict(limit, storeKey, decision, req);
  }

  private oneVerdict(limit: PreparedLimit<Req>, storeKey: string, decision: Decision, req: Req): Verdict {
    const report = toReport(limit, storeKey, decision);
    const delayMs = decision.allowed && decision.delay !== undefined ? this.shapingDelay(decision.delay) : 0;
    const verdict: Verdict = { reports: [report], allowed: decision.allowed, delayMs, now: decision.now };
    return decision.reason === undefined ? verdict : this.degraded(verdict, degradedReason([decision]), req);
  }

  private decideMany(identities: ReadonlyArray<string | undefined>, cost: number, req: Req): MaybePromise<Verdict> {
    const applied: Array<PreparedLimit<Req>> = [];
    const requests: LimitRequest[] = [];
    for (let i = 0; i < identities.length; i++) {
      const identity = identities[i];
      if (identity === undefined) continue;
      const limit = this.limits[i]!;
      applied.push(limit);
      requests.push({ key: this.storeKey(limit, identity), policy: limit.policy, cost: Math.max(cost, 1), ...limit.callOptions });
    }
    if (requests.length === 0) return SKIPPED;
    let decisions: MaybePromise<Decision[]>;
    try {
      decisions = this.limiter.decideAll(requests, undefined, cost === 0 ? 'look' : 'limit');
    } catch (error) {
      return this.failed(error, req);
    }
    const verdict = (decided: Decision[]): Verdict => {
      const reports = decided.map((decision, i) => toReport(applied[i]!, requests[i]!.key, decision));
      const verdict: Verdict = { reports, allowed: decided.every((decision) => decision.allowed), delayMs: 0, now: decided[0]!.now };
      return this.degraded(verdict, degradedReason(decided), req);
    };
    if (isPromise(decisions)) return decisions.then(verdict, (error: unknown) => this.failed(error, req));
    return verdict(decisions);
  }

  private async decideRules(req: Req, view: RequestView, cost: number): Promise<Verdict> {
    const descriptors = this.descriptors === undefined ? [{ entries: [{ key: 'remote_address', value: view.ip }] }] : await this.descriptors(req, view);
    let result: CheckResult;
    try {
      // Cost 0 looks without spending: the same check, recording nothing.
      result = await this.limiter.check({ domain: this.domain, descriptors, hits: Math.max(cost, 1) }, cost === 0 ? { spend: false } : undefined);
    } catch (error) {
      // A bad descriptor list is the caller's bug, not the store's: let it surface.
      if (error instanceof Error && (error as { code?: string }).code === 'ERR_TOLLGATE_INVALID_CHECK') throw error;
      return this.failed(error, req);
    }
    const reports = checkReports(result);
    const verdict: Verdict = { reports: reports.length === 0 ? undefined : reports, allowed: result.overallCode === 'OK', delayMs: 0, now: result.now };
    return this.degraded(verdict, result.degraded, req);
  }

  /**
   * `verdict` as a failure mode answered it: marked (the `Tollgate-Degraded` header), a 503 when
   * `closed` refused with `failClosedStatus` 503, and `onError` told.
   */
  private degraded(verdict: Verdict, reason: DegradedReason | undefined, req: Req): Verdict {
    if (reason === undefined) return verdict;
    this.tell(new StoreUnavailableError(`the rate limit store could not decide (${this.limiter.health().lastError ?? 'breaker open'}); answered ${reason}`), req);
    if (reason === DEGRADED_REASON.closed && !verdict.allowed && this.failClosedStatus === 503) return { ...verdict, unavailable: true, degraded: reason };
    return { ...verdict, degraded: reason };
  }

  private storeKey(limit: PreparedLimit<Req>, identity: string): string {
    if (typeof identity !== 'string') {
      throw new InvalidOptionError(`key functions must return a string or undefined, got ${describeValue(identity)}`);
    }
    // A client's requests come one after another: while the limit and identity stay the same, the
    // key built last is reused, the same string object, so nothing is concatenated, and the memory
    // store's hot-key check and the key checks meet a flat string they matched before (~8% of the
    // middleware's CPU per request in process).
    if (identity === this.lastIdentity && limit === this.lastLimit) return this.lastStoreKey;
    const key = limit.prefix + identity;
    const storeKey = key.length <= MAX_PLAIN_KEY ? key : limit.prefix + '#' + createHash('sha256').update(identity).digest('base64url');
    this.lastLimit = limit;
    this.lastIdentity = identity;
    this.lastStoreKey = storeKey;
    return storeKey;
  }

  /** A store error the limiter did not answer by the failure mode (a key holding foreign data). */
  private failed(error: unknown, req: Req): Verdict {
    this.tell(error, req);
    return this.failureMode === 'closed' ? UNAVAILABLE : SKIPPED;
  }

  private tell(error: unknown, req: Req): void {
    try {
      this.onError(error, req);
    } catch {
      // A failing error hook must not turn a store outage into a crash.
    }
  }

  private shapingDelay(delay: number): number {
    if (this.shaping.interval === 0) return 0;
    return Math.max(0, Math.ceil(delay - this.shaping.free * this.shaping.interval));
  }
}

function toReport<Req>(limit: PreparedLimit<Req>, storeKey: string, decision: Decision): LimitReport {
  return {
    name: limit.name,
    limit: decision.limit,
    windowMs: limit.policy.windowMs,
    rate: limit.policy.limit,
    remaining: decision.remaining,
    resetAt: decision.resetAt,
    allowed: decision.allowed,
    retryAfter: decision.retryAfter,
    partitionKey: storeKey,
  };
}

function isPromise<T>(value: MaybePromise<T>): value is Promise<T> {
  return typeof (value as Promise<T> | undefined)?.then === 'function';
}

let lastErrorLog = 0;
/** The most severe degraded reason among `decisions`, if any. */
function degradedReason(decisions: readonly Decision[]): DegradedReason | undefined {
  let found: DegradedReason | undefined;
  for (const decision of decisions) {
    const reason = degradedReasonOf(decision);
    if (reason === DEGRADED_REASON.closed) return reason;
    if (reason === DEGRADED_REASON.local || (reason === DEGRADED_REASON.open && found === undefined)) found = reason;
  }
  return found;
}

const OUTCOMES: Readonly<Record<FailureMode, string>> = {
  open: "requests pass unchecked (failureMode 'open')",
  closed: "requests are refused (failureMode 'closed')",
  local: "each process enforces its share of the limits (failureMode 'local')",
};

/** The default `onError`: one line on stderr at most every 10 s, saying what clients get meanwhile. */
function logStoreFailure(failureMode: FailureMode): (error: unknown) => void {
  const outcome = OUTCOMES[failureMode];
  return (error) => {
    const now = Date.now();
    if (now - lastErrorLog < 10_000) return;
    lastErrorLog = now;
    process.stderr.write(`tollgate: the rate limit store failed, ${outcome}: ${(error as Error)?.message ?? String(error)}\n`);
  };
}

/** The process clock, looked up per call (so a test's fake timers are seen). */
function processClock(): number {
  return Date.now();
}
