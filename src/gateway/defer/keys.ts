/**
 * Key names and ticket ids of the deferred queue. Every key of one queue carries the queue's name
 * as a `{hash tag}`, so its stream, counters and tickets live in one Redis Cluster slot and one
 * script can touch them all.
 */
import { randomBytes } from 'node:crypto';
import { InvalidOptionError, describeValue } from '../../errors.js';

/** Queue names: letters, digits, `_`, `-`, `:`; no `.` (it ends the name inside a ticket), no braces. */
const QUEUE_NAME = /^[A-Za-z0-9_:-]{1,128}$/;
/** 16 random bytes in base64url. */
const TICKET_SECRET = /^[A-Za-z0-9_-]{22}$/;

export interface QueueKeys {
  /** The stream of deferred requests. */
  readonly stream: string;
  /** Hash of counters: `enqueued` (the last sequence number) and `finished` (results recorded). */
  readonly meta: string;
  /** The hash holding one ticket's state and result. */
  ticket(secret: string): string;
}

export function checkQueueName(queueName: unknown): asserts queueName is string {
  if (typeof queueName !== 'string' || !QUEUE_NAME.test(queueName)) {
    throw new InvalidOptionError(`queue name must be 1-128 letters, digits, "_", "-" or ":", got ${describeValue(queueName)}`);
  }
}

export function queueKeys(prefix: string, queueName: string): QueueKeys {
  const base = `${prefix}{${queueName}}`;
  return { stream: `${base}:stream`, meta: `${base}:meta`, ticket: (secret) => `${base}:ticket:${secret}` };
}

/** A new ticket: the queue's name, a dot and 128 random bits (a ticket is the key to its result). */
export function newTicket(queueName: string): string {
  return `${queueName}.${randomBytes(16).toString('base64url')}`;
}

/** The queue name and secret of a ticket, or undefined when it cannot be one of ours. */
export function parseTicket(ticket: unknown): { queueName: string; secret: string } | undefined {
  if (typeof ticket !== 'string') return undefined;
  const dot = ticket.lastIndexOf('.');
  const queueName = ticket.slice(0, dot);
  const secret = ticket.slice(dot + 1);
  return dot > 0 && QUEUE_NAME.test(queueName) && TICKET_SECRET.test(secret) ? { queueName, secret } : undefined;
}
