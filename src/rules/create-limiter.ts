/**
 * The public limiter: the engine of src/limiter/ plus `check` (envoy's ShouldRateLimit) over rules.
 * Rules checking sits on top of the engine: it matches descriptors to limits, then decides them
 * through the same `limitAll` every other caller uses.
 */
import { currentTime } from '../clock.js';
import { InvalidOptionError, describeValue } from '../errors.js';
import { CoreLimiter, limiterCoreOptions, type CoreSettings, type LimiterCore, type LimiterCoreOptions } from '../limiter/index.js';
import { checkRules, type CheckOptions, type CheckRequest, type CheckResult } from './check.js';
import { acquireCheck, releaseCheck, type SlotCheckResult } from './concurrency.js';
import { reserveCheck, settleCheck, type ReserveCheckRequest, type ReserveCheckResult, type SettleCheckRequest, type SettleCheckResult } from './reservations.js';
import type { RuleSet, RuleSource } from './ruleset.js';
import type { MaybePromise } from '../store/types.js';

/** Options of {@link createLimiter}. */
export interface LimiterOptions extends LimiterCoreOptions {
  /** Rules for {@link Limiter.check}: a RuleSet (`loadRules`) or a holder that hot-reloads them. */
  readonly rules?: RuleSource;
}

export interface Limiter extends LimiterCore {
  /**
   * envoy's ShouldRateLimit: matches each descriptor of `request` against the rules and decides all
   * matched limits in one store round trip. Needs `rules` at construction. `{ spend: false }` looks
   * without spending.
   */
  check(request: CheckRequest, options?: CheckOptions): Promise<CheckResult>;
  /** A slot per descriptor with a `concurrency` limit in the rules, all or nothing, under one permit id (rules/concurrency.ts). */
  acquireCheck(request: Pick<CheckRequest, 'domain' | 'descriptors'>, id?: string): Promise<SlotCheckResult>;
  /** Frees the slots `id` holds for the request's descriptors; resolves to how many were held. */
  releaseCheck(request: Pick<CheckRequest, 'domain' | 'descriptors'>, id: string): Promise<number>;
  /** Reserves the estimate `cost` on every limit the descriptors match, all or nothing, under `id` (rules/reservations.ts). */
  reserveCheck(request: ReserveCheckRequest): Promise<ReserveCheckResult>;
  /** Settles reservation `id` with the actual `cost` on every limit the descriptors match. */
  settleCheck(request: SettleCheckRequest): Promise<SettleCheckResult>;
  /**
   * `check` for adapters on a hot path (the decision service): the result itself when the store
   * answers synchronously (the memory store), a promise otherwise. Bad input throws synchronously.
   */
  decideCheck(request: CheckRequest, options?: CheckOptions): MaybePromise<CheckResult>;
}

const LIMITER_OPTIONS: readonly string[] = ['store', 'clock', 'failureMode', 'expectedNodes', 'heartbeatMs', 'deadlineMs', 'breaker', 'maxInFlight', 'overLimitCache', 'rules'];

/** Creates a limiter on `store` (the embedded memory store by default), with optional rules. */
export function createLimiter(options: LimiterOptions = {}): Limiter {
  const settings = limiterCoreOptions(options, LIMITER_OPTIONS);
  const rules = options.rules;
  if (rules !== undefined && (typeof rules !== 'object' || rules === null || !('current' in rules))) {
    throw new InvalidOptionError(`createLimiter: rules must come from loadRules(...) or a RulesHolder, got ${describeValue(rules)}`);
  }
  return new RulesLimiter(settings, rules);
}

class RulesLimiter extends CoreLimiter implements Limiter {
  private readonly now: () => number;

  constructor(
    settings: CoreSettings,
    private readonly rules: RuleSource | undefined,
  ) {
    super(settings);
    this.now = settings.clock ?? currentTime;
  }

  check(request: CheckRequest, options?: CheckOptions): Promise<CheckResult> {
    try {
      return Promise.resolve(this.decideCheck(request, options));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async acquireCheck(request: Pick<CheckRequest, 'domain' | 'descriptors'>, id?: string): Promise<SlotCheckResult> {
    return acquireCheck(this, this.ruleSet(), request, id);
  }

  async releaseCheck(request: Pick<CheckRequest, 'domain' | 'descriptors'>, id: string): Promise<number> {
    return releaseCheck(this, this.ruleSet(), request, id);
  }

  async reserveCheck(request: ReserveCheckRequest): Promise<ReserveCheckResult> {
    return reserveCheck(this, this.ruleSet(), request, this.now);
  }

  async settleCheck(request: SettleCheckRequest): Promise<SettleCheckResult> {
    return settleCheck(this, this.ruleSet(), request, this.now);
  }

  private ruleSet(): RuleSet {
    if (this.rules === undefined) throw new InvalidOptionError('acquireCheck, releaseCheck, reserveCheck and settleCheck need rules: createLimiter({ store, rules: await loadRules(path) })');
    return this.rules.current;
  }

  decideCheck(request: CheckRequest, options?: CheckOptions): MaybePromise<CheckResult> {
    if (this.rules === undefined) throw new InvalidOptionError('check() needs rules: createLimiter({ store, rules: await loadRules(path) })');
    return checkRules(this, this.rules.current, request, this.now, options);
  }
}
