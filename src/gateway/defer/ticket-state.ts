/**
 * A ticket's hash, both ways: the fields a result is recorded as, and the {@link TicketStatus}
 * read back from them. Fields: state, id, seq, at, attempts; then status, headers, body, truncated,
 * finishedAt (delivered) or error, finishedAt (failed).
 */
import type { HeaderPair, TicketStatus } from './types.js';

/** A delivered result, as the worker records it. */
export interface DeliveredResult {
  readonly status: number;
  readonly headers: readonly HeaderPair[];
  readonly body: Buffer;
}

/** Field/value pairs that record a delivered result, the body cut to `maxBodyBytes`. */
export function deliveredFields(result: DeliveredResult, maxBodyBytes: number, finishedAt: number): (string | Buffer)[] {
  const truncated = result.body.length > maxBodyBytes;
  return [
    'state', 'delivered',
    'status', String(result.status),
    'headers', JSON.stringify(result.headers),
    'body', truncated ? result.body.subarray(0, maxBodyBytes) : result.body,
    'truncated', truncated ? '1' : '0',
    'finishedAt', String(finishedAt),
  ];
}

/** Field/value pairs that record a failure after the last attempt. */
export function failedFields(error: string, finishedAt: number): string[] {
  return ['state', 'failed', 'error', error, 'finishedAt', String(finishedAt)];
}

function text(fields: Record<string, Buffer>, name: string): string {
  return fields[name]?.toString('utf8') ?? '';
}

function parsedHeaders(json: string): HeaderPair[] {
  try {
    const value: unknown = JSON.parse(json);
    return Array.isArray(value) ? value.filter((pair): pair is HeaderPair => Array.isArray(pair) && pair.length === 2) : [];
  } catch {
    return [];
  }
}

/** The status a ticket's hash says; `finished` is the queue's count of recorded results (for the position). */
export function ticketStatus(ticket: string, fields: Record<string, Buffer>, finished: number): TicketStatus {
  const state = text(fields, 'state');
  const enqueuedAt = Number(text(fields, 'at'));
  const attempts = Number(text(fields, 'attempts'));
  const finishedAt = Number(text(fields, 'finishedAt'));
  switch (state) {
    case 'queued':
      return { state, ticket, enqueuedAt, position: Math.max(1, Number(text(fields, 'seq')) - finished) };
    case 'delivering':
      return { state, ticket, enqueuedAt, attempts };
    case 'delivered': {
      const status = Number(text(fields, 'status'));
      const body = fields.body ?? Buffer.alloc(0);
      return { state, ticket, enqueuedAt, attempts, finishedAt, status, headers: parsedHeaders(text(fields, 'headers')), body, bodyTruncated: text(fields, 'truncated') === '1' };
    }
    case 'failed':
      return { state, ticket, enqueuedAt, attempts, finishedAt, error: text(fields, 'error') };
    default:
      return { state: 'unknown', ticket };
  }
}
