/**
 * `limiter.check()`: envoy's ShouldRateLimit on Tollgate's engine. Each descriptor is matched to a
 * limit (or carries its own, envoy's RateLimitOverride); `replaces` drops replaced limits; unlimited
 * limits never touch the store; shadow-mode limits are counted and reported but never deny;
 * quota-mode limits deny only when every quota-mode limit of the request is over. The enforced
 * limits of one request are decided together, all-or-nothing (a request denied by one limit
 * consumes no other limit's quota), in one store round trip (check-decide.ts).
 */
import { InvalidCheckError, describeValue } from '../errors.js';
import { resultOf, type LimiterCore } from '../limiter/index.js';
import { ATTR, SPAN, activeTracer, inSpan, startSpan } from '../tracing.js';
import type { Span, Tracer } from '@opentelemetry/api';
import type { MaybePromise } from '../store/types.js';
import { RULE_UNITS } from '../units.js';
import { decideMatched, planCheck } from './check-decide.js';
import { listAnswer } from './list-answer.js';
import { MAX_DESCRIPTORS, MAX_ENTRIES, UNLIMITED_REMAINING } from './check-types.js';
import type { CheckOptions, CheckRequest, CheckResult, DescriptorStatus, LimitOverride, RateLimitDescriptor } from './check-types.js';
import type { DescriptorEntry } from './match.js';
import type { RuleSet } from './ruleset.js';

export type { CheckOptions, CheckRequest, CheckResult, CurrentLimit, DescriptorStatus, LimitOverride, RateLimitDescriptor } from './check-types.js';
export { MAX_DESCRIPTORS, MAX_ENTRIES, UNLIMITED_REMAINING } from './check-types.js';

/**
 * Decides `request` against `rules` (read once: a reload mid-check cannot mix rule sets) on
 * `limiter`. `clock` gives the result's time when no limit was decided. The answer itself when the
 * store answers synchronously (the memory store), else a promise; bad input throws synchronously.
 */
export function checkRules(
  limiter: LimiterCore,
  rules: RuleSet,
  request: CheckRequest,
  clock: () => number,
  options: CheckOptions = {},
): MaybePromise<CheckResult> {
  const tracer = activeTracer();
  // Off (no SDK): the check alone, no span, no closure, no captured context.
  return tracer === undefined ? checkUntraced(limiter, rules, request, clock, options) : checkTraced(tracer, limiter, rules, request, clock, options);
}

function checkTraced(tracer: Tracer, limiter: LimiterCore, rules: RuleSet, request: CheckRequest, clock: () => number, options: CheckOptions): MaybePromise<CheckResult> {
  const span = startSpan(tracer, SPAN.check, { [ATTR.operation]: options.spend === false ? 'look' : 'check' });
  if (typeof request?.domain === 'string') span.setAttribute(ATTR.domain, request.domain);
  return inSpan(span, () => checkUntraced(limiter, rules, request, clock, options), (traced, result) => describeCheck(traced, result, options));
}

function checkUntraced(limiter: LimiterCore, rules: RuleSet, request: CheckRequest, clock: () => number, options: CheckOptions): MaybePromise<CheckResult> {
  validate(request);
  const root = rules.domain(request.domain);
  if (root === undefined) {
    return { overallCode: 'OK', statuses: request.descriptors.map(() => NO_LIMIT), now: request.now ?? clock() };
  }
  // Allow and deny lists answer before any limit is matched or counted: no store call.
  const listed = root.lists === undefined ? undefined : listAnswer(root.lists, request, clock, options);
  if (listed !== undefined) return listed;
  const plan = planCheck(root, request, options);
  return decideMatched(limiter, plan, request, clock, options);
}

/**
 * A check's span: per descriptor, in request order, the rule that applied (its path, `''` for
 * none), its code and what remains; the overall result and degraded reason; shadow mode.
 */
function describeCheck(span: Span, result: CheckResult, options: CheckOptions): void {
  span.setAttributes({
    [ATTR.descriptors]: result.statuses.length,
    [ATTR.rules]: result.statuses.map((status) => status.rule ?? ''),
    [ATTR.codes]: result.statuses.map((status) => status.code),
    [ATTR.checkRemaining]: result.statuses.map((status) => status.limitRemaining),
    [ATTR.result]: resultOf(result.overallCode === 'OK'),
    [ATTR.shadowOverLimit]: result.statuses.some((status) => status.shadowOverLimit === true),
  });
  if (options.shadowMode === true) span.setAttribute(ATTR.shadowMode, true);
  if (result.degraded !== undefined) span.setAttribute(ATTR.reason, result.degraded);
}

const NO_LIMIT: DescriptorStatus = Object.freeze({ code: 'OK', limitRemaining: 0, durationUntilReset: 0 });

/** A request's domain and descriptors checked as `check` checks them (rules/concurrency.ts too). */
export const validateCheckRequest = (request: CheckRequest): void => validate(request);

function validate(request: CheckRequest): void {
  if (typeof request !== 'object' || request === null) {
    throw new InvalidCheckError(`check takes { domain, descriptors: [{ entries: [{ key, value }] }], hits? }, got ${describeValue(request)}`);
  }
  if (typeof request.domain !== 'string' || request.domain === '') {
    throw new InvalidCheckError(`domain must be a non-empty string, got ${describeValue(request.domain)}`);
  }
  if (!Array.isArray(request.descriptors)) {
    throw new InvalidCheckError(`descriptors must be an array of at most ${MAX_DESCRIPTORS}, got ${describeValue(request.descriptors)}`);
  }
  if (request.descriptors.length > MAX_DESCRIPTORS) {
    throw new InvalidCheckError(`got ${request.descriptors.length} descriptors; at most ${MAX_DESCRIPTORS} are accepted in one request`);
  }
  checkHits('hits', request.hits);
  // Loops, not forEach: no closure per check (issue 32).
  for (let i = 0; i < request.descriptors.length; i++) validateDescriptor(request.descriptors[i]!, i);
}

function validateDescriptor(descriptor: RateLimitDescriptor, i: number): void {
  if (typeof descriptor !== 'object' || descriptor === null || !Array.isArray(descriptor.entries)) {
    throw new InvalidCheckError(`descriptors[${i}] must be { entries: [{ key, value }] } with at most ${MAX_ENTRIES} entries, got ${describeValue(descriptor)}`);
  }
  if (descriptor.entries.length > MAX_ENTRIES) {
    throw new InvalidCheckError(`descriptors[${i}] has ${descriptor.entries.length} entries; at most ${MAX_ENTRIES} are accepted in one descriptor`);
  }
  checkHits(`descriptors[${i}].hitsAddend`, descriptor.hitsAddend);
  if (descriptor.limit !== undefined) checkOverride(descriptor.limit, i);
  for (let j = 0; j < descriptor.entries.length; j++) {
    const entry: DescriptorEntry = descriptor.entries[j]!;
    if (typeof entry !== 'object' || entry === null || typeof entry.key !== 'string' || entry.key === '' || typeof entry.value !== 'string') {
      throw new InvalidCheckError(`descriptors[${i}].entries[${j}] must be { key: non-empty string, value: string }, got ${describeValue(entry)}`);
    }
  }
}

function checkOverride(limit: LimitOverride, i: number): void {
  const { requestsPerUnit, unit } = (typeof limit === 'object' && limit !== null ? limit : {}) as Partial<LimitOverride>;
  if (typeof requestsPerUnit !== 'number' || !Number.isSafeInteger(requestsPerUnit) || requestsPerUnit < 0 || requestsPerUnit > UNLIMITED_REMAINING) {
    throw new InvalidCheckError(`descriptors[${i}].limit.requestsPerUnit must be a whole number from 0 to ${UNLIMITED_REMAINING}, got ${describeValue(requestsPerUnit)}`);
  }
  if (typeof unit !== 'string' || !Object.hasOwn(RULE_UNITS, unit)) {
    throw new InvalidCheckError(`descriptors[${i}].limit.unit must be one of ${Object.keys(RULE_UNITS).join(', ')}, got ${describeValue(unit)}`);
  }
}

function checkHits(field: string, hits: unknown): void {
  if (hits === undefined) return;
  if (typeof hits !== 'number' || !Number.isSafeInteger(hits) || hits < 0) {
    throw new InvalidCheckError(`${field} must be a whole number ≥ 0, got ${describeValue(hits)}`);
  }
}
