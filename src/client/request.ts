/**
 * What the client must know of a request before sending it: its method, its origin (the pacing
 * key), and whether it can be sent again. A body that is a stream is read as it is sent, so it
 * cannot be replayed: such a request is never retried.
 */

/** A request's method, origin and whether it may be sent again. */
export interface RequestFacts {
  /** Upper case. */
  readonly method: string;
  /** `scheme://host:port`, or undefined when the URL does not parse (fetch will say why). */
  readonly origin: string | undefined;
  /** Whether sending it a second time sends the same bytes. */
  readonly replayable: boolean;
}

/** The facts of `fetch(input, init)`'s request; `init` wins over a `Request`'s own fields, as in `fetch`. */
export function requestFacts(input: string | URL | Request, init: RequestInit | undefined): RequestFacts {
  const request = input instanceof Request ? input : undefined;
  const method = (init?.method ?? request?.method ?? 'GET').toUpperCase();
  const url = request?.url ?? String(input);
  let origin: string | undefined;
  try {
    origin = new URL(url).origin;
  } catch {
    origin = undefined;
  }
  const replayable = init?.body !== undefined ? isReplayableBody(init.body) : request?.body === null || request?.body === undefined;
  return { method, origin, replayable };
}

/** Bytes, text, a Blob, form data or search params are sent afresh each time; a stream is consumed once. */
function isReplayableBody(body: RequestInit['body']): boolean {
  return (
    body === null ||
    typeof body === 'string' ||
    body instanceof ArrayBuffer ||
    ArrayBuffer.isView(body) ||
    body instanceof Blob ||
    body instanceof URLSearchParams ||
    body instanceof FormData
  );
}
