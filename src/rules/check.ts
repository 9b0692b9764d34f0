/**
 * `limiter.check()`: envoy's ShouldRateLimit on Tollgate's engine. Each descriptor is matched to a
 * limit; `replaces` drops replaced limits; unlimited limits never touch the store; shadow-mode
 * limits are counted and reported but never deny. The enforced limits of one request are decided
 * together, all-or-nothing (a request denied by one limit consumes no other limit's quota), and
 * together with the shadow ones they go to the store in one round trip.
 */
import type { Decision } from '../decision.js';
import { InvalidCheckError, describeValue } from '../errors.js';
import type { LimiterCore } from '../limiter.js';
import { matchDescriptor, type DescriptorEntry, type Match } from './match.js';
import type { RuleSet } from './ruleset.js';
import type { RuleUnit } from './types.js';

/** A descriptor of a request: the entries identify who is calling and what. */
export interface RateLimitDescriptor {
  readonly entries: readonly DescriptorEntry[];
  /** Hits this descriptor adds (overrides the request's `hits`); 0 or absent means the request's. */
  readonly hitsAddend?: number;
}

/** envoy's RateLimitRequest. */
export interface CheckRequest {
  readonly domain: string;
  readonly descriptors: readonly RateLimitDescriptor[];
  /** Hits the request adds to every matched limit (envoy's hits_addend). 0 or absent means 1. */
  readonly hits?: number;
  /** Decision time in epoch ms (tests, replays). */
  readonly now?: number;
}

/** The limit that applied to a descriptor, as envoy reports it. */
export interface CurrentLimit {
  readonly requestsPerUnit: number;
  readonly unit: RuleUnit;
  /** Tollgate: the window is this many units. */
  readonly unitMultiplier: number;
  readonly name?: string;
}

/** One status per descriptor, in request order. */
export interface DescriptorStatus {
  readonly code: 'OK' | 'OVER_LIMIT';
  /** Absent when no limit applied (no match, replaced, or unlimited). */
  readonly currentLimit?: CurrentLimit;
  readonly limitRemaining: number;
  /** ms until the limit's quota is whole again. */
  readonly durationUntilReset: number;
  /** Shadow mode: this limit was exceeded but, being in shadow mode, did not deny. */
  readonly shadowOverLimit?: boolean;
  /** Where the limit is in the rules (`domain.key=value...`), when one applied. */
  readonly rule?: string;
  /** The counter this descriptor counted in (`domain|key=value|...`), when a limit applied. */
  readonly key?: string;
}

/** envoy's RateLimitResponse. */
export interface CheckResult {
  readonly overallCode: 'OK' | 'OVER_LIMIT';
  readonly statuses: readonly DescriptorStatus[];
  /**
   * The instant the check was decided (epoch ms): the decisions' own time (Redis `TIME` on Redis),
   * else the limiter's clock. Every `durationUntilReset` is relative to it, and headers derived
   * from the result must use it, not a later clock reading.
   */
  readonly now: number;
}

/** How a check spends: `spend: false` looks without spending (every matched limit at cost 0). */
export interface CheckOptions {
  /** Default true. False: nothing is recorded and nothing is denied; statuses report the quota as it stands. */
  readonly spend?: boolean;
}

/** Most descriptors in one request, and entries in one descriptor. */
export const MAX_DESCRIPTORS = 64;
export const MAX_ENTRIES = 32;
const UNLIMITED_REMAINING = 4_294_967_295;
const NO_LIMIT: DescriptorStatus = Object.freeze({ code: 'OK', limitRemaining: 0, durationUntilReset: 0 });

/**
 * Decides `request` against `rules` (read once: a reload mid-check cannot mix rule sets) on
 * `limiter`. `clock` gives the result's time when no limit was decided.
 */
export async function checkRules(
  limiter: LimiterCore,
  rules: RuleSet,
  request: CheckRequest,
  clock: () => number,
  options: CheckOptions = {},
): Promise<CheckResult> {
  validate(request);
  const root = rules.domain(request.domain);
  const statuses: DescriptorStatus[] = request.descriptors.map(() => NO_LIMIT);
  if (root === undefined) return { overallCode: 'OK', statuses, now: request.now ?? clock() };
  const mode = options.spend === false ? 'look' : 'limit';

  const matches = request.descriptors.map((descriptor) => matchDescriptor(root, request.domain, descriptor.entries));
  const replaced = new Set<string>();
  for (const match of matches) for (const name of match?.rule.replaces ?? []) replaced.add(name);

  const enforced: { index: number; match: Match; cost: number }[] = [];
  const shadow: { index: number; match: Match; cost: number }[] = [];
  matches.forEach((match, index) => {
    if (match === undefined) return;
    if (match.rule.unlimited) {
      // As envoy: unlimited reports the largest uint32 remaining, so callers can tell it from "no limit".
      statuses[index] = { code: 'OK', limitRemaining: UNLIMITED_REMAINING, durationUntilReset: 0, rule: match.rule.path };
      return;
    }
    if (match.rule.name !== undefined && replaced.has(match.rule.name)) return;
    const hits = positiveHits(request.descriptors[index]!.hitsAddend) ?? positiveHits(request.hits) ?? 1;
    (match.rule.shadowMode ? shadow : enforced).push({ index, match, cost: hits * match.rule.cost });
  });

  const at = request.now === undefined ? {} : { now: request.now };
  // Issued together, so a networked store sends them in one batch.
  const [enforcedDecisions, shadowDecisions] = await Promise.all([
    enforced.length === 0
      ? Promise.resolve([])
      : limiter.decideAll(
          enforced.map(({ match, cost }) => ({ key: match.counterKey, policy: match.rule.policy, cost })),
          at,
          mode,
        ),
    Promise.all(shadow.map(({ match, cost }) => limiter.decide(match.counterKey, match.rule.policy, { ...at, cost }, mode))),
  ]);
  const now = enforcedDecisions[0]?.now ?? shadowDecisions[0]?.now ?? request.now ?? clock();
  let overallCode: CheckResult['overallCode'] = 'OK';
  enforced.forEach(({ index, match }, i) => {
    const decision = enforcedDecisions[i]!;
    if (!decision.allowed) overallCode = 'OVER_LIMIT';
    statuses[index] = status(match, decision, decision.allowed ? 'OK' : 'OVER_LIMIT');
  });
  shadow.forEach(({ index, match }, i) => {
    const decision = shadowDecisions[i]!;
    statuses[index] = { ...status(match, decision, 'OK'), ...(decision.allowed ? {} : { shadowOverLimit: true }) };
  });
  return { overallCode, statuses, now };
}

/** A matched limit's status; its times are relative to the instant its decision was made. */
function status(match: Match, decision: Decision, code: DescriptorStatus['code']): DescriptorStatus {
  const { rule } = match;
  return {
    code,
    currentLimit: {
      requestsPerUnit: rule.requestsPerUnit!,
      unit: rule.unit!,
      unitMultiplier: rule.unitMultiplier,
      ...(rule.name !== undefined ? { name: rule.name } : {}),
    },
    limitRemaining: decision.remaining,
    // A denied limit resets no sooner than the request could pass (a limit of 0: one window).
    durationUntilReset: Math.max(0, decision.resetAt - decision.now, decision.allowed ? 0 : decision.retryAfter),
    rule: rule.path,
    key: match.counterKey,
  };
}

function positiveHits(hits: number | undefined): number | undefined {
  return hits === undefined || hits === 0 ? undefined : hits;
}

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
  request.descriptors.forEach((descriptor, i) => {
    if (typeof descriptor !== 'object' || descriptor === null || !Array.isArray(descriptor.entries)) {
      throw new InvalidCheckError(`descriptors[${i}] must be { entries: [{ key, value }] } with at most ${MAX_ENTRIES} entries, got ${describeValue(descriptor)}`);
    }
    if (descriptor.entries.length > MAX_ENTRIES) {
      throw new InvalidCheckError(`descriptors[${i}] has ${descriptor.entries.length} entries; at most ${MAX_ENTRIES} are accepted in one descriptor`);
    }
    checkHits(`descriptors[${i}].hitsAddend`, descriptor.hitsAddend);
    descriptor.entries.forEach((entry: DescriptorEntry, j: number) => {
      if (typeof entry !== 'object' || entry === null || typeof entry.key !== 'string' || entry.key === '' || typeof entry.value !== 'string') {
        throw new InvalidCheckError(`descriptors[${i}].entries[${j}] must be { key: non-empty string, value: string }, got ${describeValue(entry)}`);
      }
    });
  });
}

function checkHits(field: string, hits: unknown): void {
  if (hits === undefined) return;
  if (typeof hits !== 'number' || !Number.isSafeInteger(hits) || hits < 0) {
    throw new InvalidCheckError(`${field} must be a whole number ≥ 0, got ${describeValue(hits)}`);
  }
}
