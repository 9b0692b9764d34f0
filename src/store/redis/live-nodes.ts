/**
 * The nodes sharing a Redis store, counted for the `local` failure mode: each store object marks
 * itself alive in one sorted set, scored by when its mark runs out on Redis's clock (no clock of a
 * node's own is compared), and counts the marks still running. A node that stops marking drops out
 * once its mark runs out; the set itself expires with the last mark.
 */
import type { Cluster, Redis } from 'ioredis';

/** The sorted set of marks: outside every caller's key space (`<prefix>{<key>}…`), so `resetPrefix` never touches it. */
export function liveNodesKey(keyPrefix: string): string {
  return `${keyPrefix}nodes`;
}

const HEARTBEAT_SCRIPT = `
local nodesKey = KEYS[1]         -- sorted set: node id -> when its mark runs out (Redis ms)
local node = ARGV[1]             -- this node's id
local ttl = tonumber(ARGV[2])    -- how long this mark lasts, ms
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', nodesKey, '-inf', now)
redis.call('ZADD', nodesKey, now + ttl, node)
local last = redis.call('ZRANGE', nodesKey, -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', nodesKey, last[2])
return redis.call('ZCARD', nodesKey)
`;

/** Marks `nodeId` alive for `ttlMs`; resolves to how many nodes' marks are running, this one included. */
export async function markAlive(client: Redis | Cluster, key: string, nodeId: string, ttlMs: number): Promise<number> {
  return Number(await client.eval(HEARTBEAT_SCRIPT, 1, key, nodeId, String(ttlMs)));
}
