/**
 * The shapes the deferred queue and its drain worker share with the gateway: a request as it is
 * kept, an entry as the worker hands it out, the answers of `admit` / `deliver`, and a ticket's status.
 */

/** One header, name and value, in the order the client sent it. */
export type HeaderPair = readonly [name: string, value: string];

/** Headers as the gateway has them: pairs, or node's `IncomingHttpHeaders`-style record. */
export type HeadersInput = readonly HeaderPair[] | Readonly<Record<string, string | readonly string[] | undefined>>;

/** A request handed to {@link DeferredQueue.enqueue}. */
export interface DeferredRequestInput {
  /** HTTP method, e.g. `POST`. */
  readonly method: string;
  /** Path with its query string, e.g. `/orders?dry=1`. */
  readonly path: string;
  /** Hop-by-hop headers (and those `Connection` names) are dropped before the request is stored. */
  readonly headers?: HeadersInput;
  /** The whole body; at most the queue's `maxBodyBytes`. */
  readonly body?: Buffer | Uint8Array | string;
}

/** A request as the queue keeps it. */
export interface DeferredRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: readonly HeaderPair[];
  readonly body: Buffer;
}

/** A deferred request as the drain worker hands it to `admit` and `deliver`. */
export interface DeferredEntry extends DeferredRequest {
  readonly queueName: string;
  /** The ticket id; also the `Idempotency-Key` of every delivery attempt. */
  readonly ticket: string;
  /** The Redis stream entry id. */
  readonly id: string;
  /** Epoch ms when the request was enqueued. */
  readonly enqueuedAt: number;
  /** The attempt about to be made, from 1 (counted across workers and restarts). */
  readonly attempt: number;
}

/** What {@link DeferredQueue.enqueue} answers: accepted with a ticket, or refused because the queue is full. */
export type EnqueueResult =
  | { readonly accepted: true; readonly ticket: string; readonly id: string; readonly position: number; readonly length: number }
  | { readonly accepted: false; readonly length: number; readonly maxLength: number };

/** `admit`'s answer: deliver now, or ask again after `retryAfterMs`. */
export interface Admission {
  readonly allowed: boolean;
  /** Milliseconds to wait before asking again (read only when not allowed). */
  readonly retryAfterMs: number;
}

/** The upstream's answer to one delivery. A 5xx is retried; anything else is the ticket's result. */
export interface DeliveryResponse {
  readonly status: number;
  readonly headers?: HeadersInput;
  readonly body?: Buffer | Uint8Array | string;
}

/** Where a ticket stands. `unknown` covers a malformed ticket, one never issued and an expired result. */
export type TicketStatus =
  | { readonly state: 'queued'; readonly ticket: string; readonly enqueuedAt: number; readonly position: number }
  | { readonly state: 'delivering'; readonly ticket: string; readonly enqueuedAt: number; readonly attempts: number }
  | {
      readonly state: 'delivered';
      readonly ticket: string;
      readonly enqueuedAt: number;
      readonly attempts: number;
      readonly finishedAt: number;
      readonly status: number;
      readonly headers: readonly HeaderPair[];
      readonly body: Buffer;
      /** True when the upstream's body was longer than the queue's `maxResultBodyBytes` and was cut. */
      readonly bodyTruncated: boolean;
    }
  | {
      readonly state: 'failed';
      readonly ticket: string;
      readonly enqueuedAt: number;
      readonly attempts: number;
      readonly finishedAt: number;
      /** What went wrong on the last attempt, e.g. `upstream answered 503`. */
      readonly error: string;
    }
  | { readonly state: 'unknown'; readonly ticket: string };
