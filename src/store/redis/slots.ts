/**
 * Concurrency slots on Redis (scripts/slots.lua): one script call per acquire or release, on one
 * sorted set per caller's key, `<prefix>{<key>}:slots`, so on a Cluster the call goes to that
 * key's slot and a key's slots share its hash tag with its other state (`resetPrefix` forgets them
 * too).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import type { SlotAnswer, SlotRelease, SlotRequest } from '../slots.js';
import { escapeKeyPart } from './keys.js';

const SOURCE = readFileSync(new URL('./scripts/slots.lua', import.meta.url), 'utf8');
const SHA1 = createHash('sha1').update(SOURCE).digest('hex');

/** The sorted set of `key`'s slots. */
export function slotsKey(keyPrefix: string, key: string): string {
  return `${keyPrefix}{${escapeKeyPart(key)}}:slots`;
}

/** EVALSHA of slots.lua, sending its source once if this Redis does not have it (restart, failover, first use). */
async function run(client: Redis | Cluster, key: string, args: readonly string[]): Promise<number[]> {
  try {
    return (await client.evalsha(SHA1, 1, key, ...args)) as number[];
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
    return (await client.eval(SOURCE, 1, key, ...args)) as number[];
  }
}

const timeArg = (now: number | undefined): string => (now === undefined ? '' : String(now));

export async function acquireSlot(client: Redis | Cluster, key: string, request: SlotRequest, now: number | undefined): Promise<SlotAnswer> {
  const [allowed, held, retryAfter, expiresAt, at] = await run(client, key, ['acquire', timeArg(now), request.id, String(request.limit), String(request.ttlMs)]);
  return { allowed: allowed === 1, held: held!, retryAfter: retryAfter!, expiresAt: expiresAt!, now: at! };
}

export async function releaseSlot(client: Redis | Cluster, key: string, id: string, now: number | undefined): Promise<SlotRelease> {
  const [released, held] = await run(client, key, ['release', timeArg(now), id]);
  return { released: released === 1, held: held! };
}

export async function heldSlots(client: Redis | Cluster, key: string, now: number | undefined): Promise<number> {
  const [held] = await run(client, key, ['held', timeArg(now), '']);
  return held!;
}
