/**
 * The middleware's `concurrency: { limit, ttl, key? }`: at most `limit` requests of a caller in
 * flight at once, across every process sharing the store. After the rate limits admit a request
 * (or alone), a slot is acquired through the limiter (limiter/concurrency.ts) and released when
 * the response finishes or its connection closes, whichever comes first (an aborted client frees
 * its slot at once); `ttl` bounds how long a process that died keeps it. A refused request gets
 * 429 with `Retry-After`, or 503 when `failureMode: 'closed'` answered with `failClosedStatus` 503.
 */
import type { EventEmitter } from 'node:events';
import { InvalidOptionError, describeValue } from '../errors.js';
import { checkSlotTtl, DEGRADED_REASON, MAX_SLOTS, type Permit } from '../limiter/index.js';
import { checkOptions, checkWholeNumber, optionalFunction } from '../options.js';
import type { Limiter } from '../rules/create-limiter.js';
import type { MaybePromise } from '../store/types.js';
import type { ConcurrencyOptions, KeyFunction } from './options.js';
import { UNAVAILABLE_BODY, type HeaderList } from './report.js';
import { DEGRADED_HEADER } from './verdict.js';
import type { RequestView } from './view.js';

/** Why a request got no slot: the answer to send. */
export interface SlotRefusal {
  readonly status: 429 | 503;
  readonly headers: HeaderList;
  readonly body: string;
}

/** What a response that holds a slot must emit: `finish` (answered) or `close` (answered, or the client left). */
type ResponseEvents = Pick<EventEmitter, 'once'> & { readonly destroyed: boolean; readonly writableFinished: boolean };

const FIELDS: readonly string[] = ['limit', 'ttl', 'key'];
/** Slot keys are apart from every limit's counters (`<name>|…`). */
const PREFIX = 'concurrency|';

export class RequestSlots<Req> {
  private readonly limit: number;
  private readonly ttlMs: number;
  private readonly key: KeyFunction<Req> | undefined;

  constructor(
    options: ConcurrencyOptions<Req>,
    private readonly limiter: Limiter,
    defaultKey: KeyFunction<Req> | undefined,
    private readonly failClosedStatus: 429 | 503,
  ) {
    checkOptions('concurrency', options, FIELDS, "{ limit: 10, ttl: '30s' }");
    this.limit = checkWholeNumber(options.limit, { name: 'concurrency.limit', min: 1, max: MAX_SLOTS, meaning: 'requests of a caller in flight at once' });
    this.ttlMs = checkSlotTtl(options.ttl, 'concurrency.ttl');
    this.key = optionalFunction(options.key, 'concurrency.key') ?? defaultKey;
  }

  /**
   * Takes a slot for the request and ties its release to `res`; resolves to undefined when the
   * request may go on (a slot is held, or no key applies), else to the refusal to answer.
   */
  async hold(req: Req, view: RequestView, res: ResponseEvents): Promise<SlotRefusal | undefined> {
    const identity = await (this.key === undefined ? view.ipKey : (this.key(req, view) as MaybePromise<string | undefined>));
    if (identity === undefined) return undefined;
    if (typeof identity !== 'string') throw new InvalidOptionError(`concurrency.key must return a string or undefined, got ${describeValue(identity)}`);
    const permit = await this.limiter.acquire(PREFIX + identity, { limit: this.limit, ttl: this.ttlMs });
    if (permit.allowed) {
      releaseWhenDone(permit, res);
      return undefined;
    }
    return refusal(permit, this.failClosedStatus);
  }
}

/** Releases `permit` once, when `res` finishes or closes (at once if it already has: the client left while the slot was taken). */
function releaseWhenDone(permit: Permit, res: ResponseEvents): void {
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    // A release that fails leaves the slot to expire at its ttl: nothing to tell the client.
    permit.release().catch(() => undefined);
  };
  if (res.destroyed || res.writableFinished) return release();
  res.once('finish', release);
  res.once('close', release);
}

function refusal(permit: Permit, failClosedStatus: 429 | 503): SlotRefusal {
  const headers: [string, string][] = [['retry-after', String(Math.max(1, Math.ceil(permit.retryAfter / 1000)))]];
  if (permit.reason !== undefined) headers.push([DEGRADED_HEADER, permit.reason]);
  if (permit.reason === DEGRADED_REASON.closed && failClosedStatus === 503) return { status: 503, headers, body: UNAVAILABLE_BODY };
  const body = JSON.stringify({
    error: 'too_many_concurrent_requests',
    message: `At most ${permit.limit} requests of yours may be in flight at once; retry when one has finished.`,
    limit: permit.limit,
    held: permit.held,
    retryAfter: Math.ceil(permit.retryAfter / 1000),
  });
  return { status: 429, headers, body };
}

/** The option, checked, or undefined when not given. */
export function requestSlots<Req>(options: unknown, limiter: Limiter, defaultKey: KeyFunction<Req> | undefined, failClosedStatus: 429 | 503): RequestSlots<Req> | undefined {
  return options === undefined ? undefined : new RequestSlots(options as ConcurrencyOptions<Req>, limiter, defaultKey, failClosedStatus);
}
