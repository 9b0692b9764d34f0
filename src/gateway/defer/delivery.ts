/**
 * One entry through the drain worker: skip it if its result is already recorded, wait for the
 * limiter's admission, deliver with the ticket as idempotency key, retry a 5xx or network error with
 * backoff, and record the result and acknowledge the entry in one script.
 */
import { backoffDelay } from './backoff.js';
import { parseTicket, type QueueKeys } from './keys.js';
import { callHook } from './queue-options.js';
import { bodyBytes, endToEndHeaders, headerPairs } from './request.js';
import type { StreamEntry } from './stream.js';
import { deliveredFields, failedFields, type DeliveredResult } from './ticket-state.js';
import type { DeferredEntry, DeliveryResponse } from './types.js';
import type { WorkerSettings } from './worker-options.js';

/** What the worker lends to each delivery. */
export interface DeliveryContext {
  readonly settings: WorkerSettings;
  readonly keys: QueueKeys;
  /** Aborted when stop() begins: waits for admission and backoff end at once. */
  readonly stopping: AbortSignal;
  /** Aborted when stop()'s grace runs out: the delivery in flight is abandoned (the entry stays pending). */
  readonly abandoning: AbortSignal;
  /** Aborted when another worker took this entry over: this one starts no attempt of it any more. */
  readonly lost: AbortSignal;
  /** Waits `ms`; false when stopping or the loss of the entry cut it short. */
  wait(ms: number): Promise<boolean>;
}

/** What the begin script answers when the entry is pending on another consumer. */
const BEGIN_LOST = -2;

type AttemptOutcome = { readonly kind: 'response'; readonly result: DeliveredResult } | { readonly kind: 'retry'; readonly error: string } | { readonly kind: 'abandoned' };

function errorText(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** The upstream's response checked and normalised; throws when `deliver` answered something else. */
function deliveredResult(response: DeliveryResponse): DeliveredResult {
  const status = (response as Partial<DeliveryResponse> | undefined)?.status;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 100 || status > 599) {
    throw new TypeError(`deliver must answer { status, headers, body } with a status from 100 to 599, got ${JSON.stringify(status)}`);
  }
  return { status, headers: endToEndHeaders(headerPairs(response.headers, 'deliver: headers')), body: bodyBytes(response.body, 'deliver: body') };
}

async function attemptDelivery(context: DeliveryContext, entry: DeferredEntry): Promise<AttemptOutcome> {
  try {
    const result = deliveredResult(await context.settings.deliver(entry, entry.ticket, context.abandoning));
    if (context.abandoning.aborted) return { kind: 'abandoned' };
    return result.status >= 500 ? { kind: 'retry', error: `upstream answered ${result.status}` } : { kind: 'response', result };
  } catch (error) {
    return context.abandoning.aborted ? { kind: 'abandoned' } : { kind: 'retry', error: errorText(error) };
  }
}

/** Asks `admit` until it allows the entry; false when the worker stops first. */
async function waitForAdmission(context: DeliveryContext, entry: DeferredEntry): Promise<boolean> {
  const { admit, hooks, backoff } = context.settings;
  while (!context.stopping.aborted && !context.lost.aborted) {
    let wait: number;
    try {
      const admission = await admit(entry);
      if (admission.allowed) return true;
      wait = admission.retryAfterMs;
      if (typeof wait !== 'number' || !Number.isFinite(wait) || wait < 0) throw new TypeError(`admit must answer { allowed, retryAfterMs } with retryAfterMs ≥ 0, got ${JSON.stringify(wait)}`);
    } catch (error) {
      callHook(hooks.error, error);
      wait = backoff.baseMs;
    }
    if (!(await context.wait(Math.max(1, wait)))) return false;
  }
  return false;
}

/** Records `fields` (none: acknowledge only) and acknowledges the entry, unless the worker abandoned it. */
async function finish(context: DeliveryContext, id: string, ticketKey: string, fields: (string | Buffer)[]): Promise<void> {
  if (context.abandoning.aborted) return;
  const { queue, group, queueName } = context.settings;
  const [, length] = await queue.scripts.tollgateDeferFinish(context.keys.stream, context.keys.meta, ticketKey, group, id, queue.settings.resultTtlMs, ...fields);
  callHook(queue.settings.hooks.queueLength, queueName, length);
}

async function markFailed(context: DeliveryContext, entry: DeferredEntry, ticketKey: string, attempts: number, error: string): Promise<void> {
  const { queue, hooks, queueName } = context.settings;
  await finish(context, entry.id, ticketKey, failedFields(error, queue.settings.clock()));
  callHook(hooks.failed, queueName, entry.ticket, attempts, error);
}

/** Delivers one stream entry, or leaves it pending when the worker stops. */
export async function deliverEntry(context: DeliveryContext, raw: StreamEntry): Promise<void> {
  const ticket = parseTicket(raw.fields?.ticket);
  if (raw.fields === undefined || ticket === undefined) {
    // Deleted while pending, or not written by a queue: nothing to deliver.
    await context.settings.queue.redis.xack(context.keys.stream, context.settings.group, raw.id);
    return;
  }
  const ticketKey = context.keys.ticket(ticket.secret);
  const [state, attempts, lastError] = await context.settings.queue.redis.hmget(ticketKey, 'state', 'attempts', 'error');
  if (state === 'delivered' || state === 'failed') {
    // Never deliver a recorded request again. (finish acknowledges in the script that records, so
    // this is a guard against an entry put back by hand, not a path a crash can take.)
    await finish(context, raw.id, ticketKey, []);
    return;
  }
  const entry: DeferredEntry = { ...raw.fields, queueName: context.settings.queueName, id: raw.id, attempt: Number(attempts ?? 0) + 1 };
  await deliverWithRetries(context, entry, ticketKey, lastError ?? undefined);
}

/** Attempts until one is recorded (a non-5xx response) or maxAttempts is reached; returns early when the worker stops. */
async function deliverWithRetries(context: DeliveryContext, first: DeferredEntry, ticketKey: string, previousError: string | undefined): Promise<void> {
  const { settings } = context;
  const { queue, hooks, queueName, maxAttempts } = settings;
  let made = first.attempt - 1;
  // Attempts already counted but without an error were cut short: their worker crashed or stopped.
  let lastError = previousError ?? 'the last attempt was interrupted (its worker crashed or was stopped)';
  for (;;) {
    if (made >= maxAttempts) return markFailed(context, first, ticketKey, made, lastError);
    if (!(await waitForAdmission(context, { ...first, attempt: made + 1 }))) return;
    const begun = await queue.scripts.tollgateDeferBegin(ticketKey, context.keys.stream, settings.group, first.id, settings.consumer);
    // Taken over by another worker (this one was silent past minIdleMs): that one delivers it.
    if (begun === BEGIN_LOST) return;
    if (begun < 0) return finish(context, first.id, ticketKey, []);
    made = begun;
    const outcome = await attemptDelivery(context, { ...first, attempt: made });
    if (outcome.kind === 'abandoned') return;
    if (outcome.kind === 'response') {
      await finish(context, first.id, ticketKey, deliveredFields(outcome.result, queue.settings.maxResultBodyBytes, queue.settings.clock()));
      callHook(hooks.delivered, queueName, first.ticket, outcome.result.status, made);
      return;
    }
    lastError = outcome.error;
    // Kept with the ticket, so a worker resuming after a crash reports the real last error.
    await queue.redis.hset(ticketKey, 'error', lastError);
    if (made >= maxAttempts) return markFailed(context, first, ticketKey, made, lastError);
    const delayMs = backoffDelay(made, settings.backoff, settings.random);
    callHook(hooks.retried, queueName, first.ticket, made, delayMs, lastError);
    if (!(await context.wait(delayMs))) return;
  }
}
