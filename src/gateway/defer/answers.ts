/**
 * The HTTP side of `on_limit: defer`: a throttled request read (its body capped), stored, and
 * answered `202 Accepted` with its ticket; and `GET /_tollgate/deferred/<ticket>` on the proxy port,
 * where the client reads where its request stands and, once delivered, the upstream's answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { DeferredBodyTooLargeError, InvalidDeferredRequestError } from '../../errors.js';
import type { HeaderList } from '../../http/report.js';
import { DEFERRED_STATUS_PREFIX } from './config.js';
import type { TicketStatus } from './index.js';
import type { DeferralPort, GatewayRoute } from '../state.js';
import { sendJson } from '../reply.js';
import { storedHeaders } from './replay.js';

/** The whole body, or undefined as soon as it passes `maxBytes`. */
function readCapped(req: IncomingMessage, maxBytes: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= maxBytes) chunks.push(chunk);
      else {
        req.off('data', onData).off('end', onEnd);
        resolve(undefined);
      }
    };
    const onEnd = (): void => resolve(Buffer.concat(chunks, size));
    req.on('data', onData).once('end', onEnd).once('error', reject);
  });
}

function tooLarge(res: ServerResponse, maxBytes: number, size: number | undefined): void {
  const got = size === undefined ? 'longer' : `${size} bytes`;
  // The client may still be sending: the connection goes with the answer.
  sendJson(res, 413, { error: 'payload_too_large', message: `the request body is ${got}; a deferred request keeps at most ${maxBytes} bytes (the route's defer.max_body)` }, [['connection', 'close']]);
}

/**
 * Stores a request the route throttled and answers 202 with its ticket; a full queue gets the
 * usual 429 (`refuse`), a body over `max_body` 413, and Redis unreachable 503 with `Retry-After: 1`.
 */
export function deferRequest(deferral: DeferralPort, route: GatewayRoute, req: IncomingMessage, res: ServerResponse, headers: HeaderList, refuse: () => void): void {
  const settings = route.defer!;
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > settings.maxBodyBytes) return tooLarge(res, settings.maxBodyBytes, declared);
  if (req.headers.expect?.toLowerCase() === '100-continue') res.writeContinue();
  const stored = readCapped(req, settings.maxBodyBytes).then(async (body) => {
    if (body === undefined) return tooLarge(res, settings.maxBodyBytes, undefined);
    const request = { method: req.method ?? 'GET', path: req.url ?? '/', headers: storedHeaders(req), body };
    const result = await deferral.queue(route).enqueue(settings.queue, request, { maxLength: settings.maxLength });
    if (!result.accepted) return refuse();
    const statusUrl = `${DEFERRED_STATUS_PREFIX}${result.ticket}`;
    sendJson(res, 202, { ticket: result.ticket, status_url: statusUrl, position: result.position }, [...headers, ['location', statusUrl]]);
  });
  stored.catch((error: unknown) => {
    if (error instanceof DeferredBodyTooLargeError) return tooLarge(res, error.limitBytes, undefined);
    if (error instanceof InvalidDeferredRequestError) return sendJson(res, 400, { error: 'bad_request', message: error.message });
    deferral.logger.error({ err: error instanceof Error ? error.message : error, queue: settings.queue }, 'deferred queue: a throttled request could not be stored');
    sendJson(res, 503, { error: 'unavailable', message: 'the deferred queue cannot be reached; try again shortly' }, [['retry-after', '1']]);
  });
}

/** A ticket's status as JSON: snake_case fields, and a delivered body as text when it is UTF-8, else base64. */
export function ticketJson(status: TicketStatus): Record<string, unknown> {
  switch (status.state) {
    case 'unknown':
      return { ticket: status.ticket, state: 'unknown' };
    case 'queued':
      return { ticket: status.ticket, state: status.state, enqueued_at: status.enqueuedAt, position: status.position };
    case 'delivering':
      return { ticket: status.ticket, state: status.state, enqueued_at: status.enqueuedAt, attempts: status.attempts };
    case 'failed':
      return { ticket: status.ticket, state: status.state, enqueued_at: status.enqueuedAt, attempts: status.attempts, finished_at: status.finishedAt, error: status.error };
    case 'delivered': {
      const text = status.body.toString('utf8');
      const isText = Buffer.from(text, 'utf8').equals(status.body);
      const response = { status: status.status, headers: status.headers, body: isText ? text : status.body.toString('base64'), body_encoding: isText ? 'utf8' : 'base64', body_truncated: status.bodyTruncated };
      return { ticket: status.ticket, state: status.state, enqueued_at: status.enqueuedAt, attempts: status.attempts, finished_at: status.finishedAt, response };
    }
  }
}

/** `GET|HEAD /_tollgate/deferred/<ticket>`: 200 with the ticket's state, 404 when unknown or expired, 503 when Redis is down. */
export function answerTicket(deferral: DeferralPort, method: string, path: string, res: ServerResponse): void {
  if (method !== 'GET' && method !== 'HEAD') return sendJson(res, 405, { error: 'method_not_allowed', message: 'read a ticket with GET' }, [['allow', 'GET, HEAD']]);
  let ticket: string;
  try {
    ticket = decodeURIComponent(path.slice(DEFERRED_STATUS_PREFIX.length));
  } catch {
    ticket = '';
  }
  deferral.status(ticket).then(
    (status) => {
      const found = status.state !== 'unknown';
      sendJson(res, found ? 200 : 404, found ? ticketJson(status) : { error: 'not_found', message: 'no such ticket: it was never issued, or its result expired (the route\'s defer.result_ttl)' }, [['cache-control', 'no-store']]);
    },
    (error: unknown) => {
      deferral.logger.warn({ err: error instanceof Error ? error.message : error }, 'deferred queue: a ticket could not be read');
      sendJson(res, 503, { error: 'unavailable', message: 'the deferred queue cannot be reached; try again shortly' }, [['retry-after', '1']]);
    },
  );
}
