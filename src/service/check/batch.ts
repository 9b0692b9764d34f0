/**
 * The bodies of `POST /v1/check` (one check in Tollgate's friendlier shape, or envoy's) and of
 * `POST /v1/check/batch` (many of them in one request: `{ "checks": [...] }`). A batch is checked
 * whole before any of its checks is decided, so a refused batch changes no counter; then each
 * check goes through the same path as `/v1/check` (blocks, the limiter, the check event), in order.
 */
import { InvalidCheckError, describeValue } from '../../errors.js';
import { validateCheckRequest, type CheckRequest, type CheckResult } from '../../rules/check.js';
import type { DegradedReason } from '../../limiter/index.js';
import type { MaybePromise } from '../../store/types.js';
import type { ServiceContext } from '../context.js';
import { UNAVAILABLE_ANSWER, decideCheck, degradedAnswer } from './decide.js';

/** Most checks one `/v1/check/batch` request may carry (the body's 1 MiB bounds it too). */
export const MAX_BATCH_CHECKS = 1_000;

/**
 * `/v1/check` takes envoy's shape, or a friendlier one where a descriptor is a plain object of
 * key → value (in order): `{ domain, descriptors: [{ remote_address: "1.2.3.4" }], hits?, requestId? }`.
 */
export function friendlyCheck(body: unknown): CheckRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidCheckError(`the body must be { domain, descriptors, hits? }, got ${describeValue(body)}`);
  }
  const { domain, descriptors, hits, requestId, ...rest } = body as Record<string, unknown>;
  if (Object.keys(rest).length > 0) throw new InvalidCheckError(`unknown field ${JSON.stringify(Object.keys(rest)[0])}; the fields are domain, descriptors, hits, requestId`);
  // The request's id, for limits with a usage ledger: a retry repeating it is billed once.
  if (requestId !== undefined && (typeof requestId !== 'string' || requestId.length === 0 || requestId.length > 200)) {
    throw new InvalidCheckError(`requestId must be a string of 1 to 200 characters (the id a client repeats when it retries), got ${describeValue(requestId)}`);
  }
  if (!Array.isArray(descriptors)) throw new InvalidCheckError('descriptors must be an array');
  return {
    domain: domain as string,
    descriptors: descriptors.map((descriptor: unknown) => {
      if (typeof descriptor === 'object' && descriptor !== null && !Array.isArray(descriptor) && !('entries' in descriptor)) {
        return { entries: Object.entries(descriptor).map(([key, value]) => ({ key, value: value as string })) };
      }
      return descriptor as CheckRequest['descriptors'][number];
    }),
    ...(hits !== undefined ? { hits: hits as number } : {}),
    ...(requestId !== undefined ? { requestId: requestId as string } : {}),
  };
}

/**
 * The checks of a `/v1/check/batch` body, each read as `/v1/check` reads its body and validated as
 * the limiter will: a 400 naming the first bad one (`checks[3]: ...`) before anything is counted.
 */
export function readBatch(body: unknown): CheckRequest[] {
  const checks = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as { checks?: unknown }).checks : undefined;
  if (!Array.isArray(checks)) throw new InvalidCheckError(`the body must be { checks: [ <a /v1/check body>, ... ] }, got ${describeValue(body)}`);
  const extra = Object.keys(body as object).find((field) => field !== 'checks');
  if (extra !== undefined) throw new InvalidCheckError(`unknown field ${JSON.stringify(extra)}; the only field is checks`);
  if (checks.length === 0 || checks.length > MAX_BATCH_CHECKS) {
    throw new InvalidCheckError(`checks must hold 1 to ${MAX_BATCH_CHECKS} checks, got ${checks.length}; send more in several requests`);
  }
  return checks.map((check: unknown, i) => {
    try {
      const request = friendlyCheck(check);
      validateCheckRequest(request);
      return request;
    } catch (error) {
      if (error instanceof InvalidCheckError) throw new InvalidCheckError(`checks[${i}]: ${error.message}`);
      throw error;
    }
  });
}

/** A check's answer: `/v1/check`'s body, or the unavailable answer (`--fail-closed-status 503`, a 503 on `/v1/check`). */
export type CheckAnswer =
  | { overallCode: CheckResult['overallCode']; statuses: CheckResult['statuses']; degraded?: DegradedReason; unknownDomain?: true }
  | (typeof UNAVAILABLE_ANSWER & { degraded: DegradedReason });

/**
 * What `/v1/check` answers for a decided check, and a batch for each of its checks. As envoy, a
 * domain without rules limits nothing; said aloud, so a misspelt domain is not taken for an allowed request.
 */
export function checkAnswer(ctx: ServiceContext, check: CheckRequest, { overallCode, statuses, degraded: reason }: CheckResult): CheckAnswer {
  const degraded = degradedAnswer(ctx, reason);
  if (degraded?.unavailable === true) return { ...UNAVAILABLE_ANSWER, degraded: degraded.reason };
  const unknownDomain = ctx.holder.current.domain(check.domain) === undefined;
  return { overallCode, statuses, ...(degraded !== undefined ? { degraded: degraded.reason } : {}), ...(unknownDomain ? { unknownDomain: true as const } : {}) };
}

/**
 * Decides every check of a batch, in order (checks of one key see each other's counts), each as
 * `/v1/check` decides it (counted as a `check`); the answers in the same order. The answers
 * themselves when every decision was synchronous (the memory store), else a promise.
 */
export function decideBatch(ctx: ServiceContext, checks: readonly CheckRequest[]): MaybePromise<CheckAnswer[]> {
  const decided = checks.map((check) => decideCheck(ctx, check, 'check'));
  const answers = (all: readonly CheckResult[]): CheckAnswer[] => all.map((result, i) => checkAnswer(ctx, checks[i]!, result));
  if (!decided.some((result) => result instanceof Promise)) return answers(decided as CheckResult[]);
  return Promise.all(decided).then(answers);
}
