/**
 * The drain worker's reads of a queue's stream through its consumer group: its own pending entries
 * first (after a restart), then entries idle too long on another consumer (one that died), then new
 * ones. One entry at a time, so the queue's order is the delivery order.
 */
import type { Cluster, Redis } from 'ioredis';
import type { HeaderPair } from './types.js';

/** One stream entry, decoded; `request` is undefined when the entry was deleted while still pending. */
export interface StreamEntry {
  readonly id: string;
  readonly fields?: {
    readonly ticket: string;
    readonly method: string;
    readonly path: string;
    readonly headers: readonly HeaderPair[];
    readonly body: Buffer;
    readonly enqueuedAt: number;
  };
}

/** Where the worker reads from: the client for ordinary commands and a second one for blocking reads. */
export interface StreamReader {
  readonly redis: Redis | Cluster;
  readonly blocking: Redis | Cluster;
  readonly stream: string;
  readonly group: string;
  readonly consumer: string;
}

/** Creates the consumer group (and the stream) unless it exists. */
export async function ensureGroup(reader: StreamReader): Promise<void> {
  try {
    await reader.redis.call('XGROUP', 'CREATE', reader.stream, reader.group, '0', 'MKSTREAM');
  } catch (error) {
    // BUSYGROUP is Redis's code for "this group exists already": another worker made it.
    if (!(error instanceof Error && error.message.startsWith('BUSYGROUP'))) throw error;
  }
}

function decodeHeaders(json: string): HeaderPair[] {
  const value: unknown = JSON.parse(json);
  return Array.isArray(value) ? (value as HeaderPair[]) : [];
}

function decodeEntry(raw: unknown): StreamEntry | undefined {
  if (!Array.isArray(raw) || raw.length < 2) return undefined;
  const id = String(raw[0]);
  const list = raw[1];
  if (!Array.isArray(list)) return { id };
  const map = new Map<string, Buffer>();
  for (let i = 0; i + 1 < list.length; i += 2) map.set(String(list[i]), list[i + 1] as Buffer);
  const text = (name: string): string => map.get(name)?.toString('utf8') ?? '';
  return {
    id,
    fields: {
      ticket: text('ticket'),
      method: text('method'),
      path: text('path'),
      headers: decodeHeaders(text('headers') || '[]'),
      body: map.get('body') ?? Buffer.alloc(0),
      enqueuedAt: Number(text('at')),
    },
  };
}

/** The first entry of an XREADGROUP reply, if any. */
function firstRead(reply: unknown): StreamEntry | undefined {
  if (!Array.isArray(reply) || reply.length === 0) return undefined;
  const entries = (reply[0] as unknown[])[1];
  return Array.isArray(entries) ? decodeEntry(entries[0]) : undefined;
}

/** The oldest entry this consumer read and never acknowledged (left by a crash or an abandoned stop). */
export async function readOwnPending(reader: StreamReader): Promise<StreamEntry | undefined> {
  return firstRead(await reader.redis.callBuffer('XREADGROUP', 'GROUP', reader.group, reader.consumer, 'COUNT', '1', 'STREAMS', reader.stream, '0'));
}

/** Takes over one entry pending on another consumer for at least `minIdleMs` (that consumer is presumed dead). */
export async function reclaimIdle(reader: StreamReader, minIdleMs: number): Promise<StreamEntry | undefined> {
  const reply = await reader.redis.callBuffer('XAUTOCLAIM', reader.stream, reader.group, reader.consumer, String(minIdleMs), '0-0', 'COUNT', '1');
  if (!Array.isArray(reply)) return undefined;
  const claimed = reply[1];
  return Array.isArray(claimed) ? decodeEntry(claimed[0]) : undefined;
}

/** The next new entry, waiting up to `blockMs` on the blocking client. */
export async function readNew(reader: StreamReader, blockMs: number): Promise<StreamEntry | undefined> {
  const reply = await reader.blocking.callBuffer('XREADGROUP', 'GROUP', reader.group, reader.consumer, 'COUNT', '1', 'BLOCK', String(blockMs), 'STREAMS', reader.stream, '>');
  return firstRead(reply);
}
