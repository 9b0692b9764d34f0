/**
 * The deferred queue's Lua: each step that must not race (the bound, the start of an attempt, the
 * recording of a result with its XACK) is one script, so concurrent gateways and workers cannot
 * slip between a check and a write. Registered with ioredis `defineCommand` (EVALSHA, re-sent on
 * NOSCRIPT).
 */
import type { Cluster, Redis } from 'ioredis';

/** Appends a request unless the stream already holds `maxLength` entries. */
const ENQUEUE = `
local stream = KEYS[1]             -- the queue's stream
local meta = KEYS[2]               -- counters: enqueued, finished
local ticketKey = KEYS[3]          -- the new ticket's hash
local maxLength = tonumber(ARGV[1]) -- the bound: refuse at this many entries
local ticket = ARGV[2]             -- the ticket id (queue.secret)
local method = ARGV[3]
local path = ARGV[4]
local headers = ARGV[5]            -- JSON array of [name, value]
local body = ARGV[6]               -- raw bytes
local enqueuedAt = ARGV[7]         -- epoch ms

local length = redis.call('XLEN', stream)
if length >= maxLength then return {0, length} end
local seq = redis.call('HINCRBY', meta, 'enqueued', 1)
local id = redis.call('XADD', stream, '*', 'ticket', ticket, 'method', method, 'path', path, 'headers', headers, 'body', body, 'at', enqueuedAt)
redis.call('HSET', ticketKey, 'state', 'queued', 'id', id, 'seq', seq, 'at', enqueuedAt, 'attempts', 0)
local finished = tonumber(redis.call('HGET', meta, 'finished') or '0')
return {1, length + 1, id, seq - finished}
`;

/** Whether the entry is pending on this consumer: XPENDING filtered by consumer finds it. */
const OWNED = `
local function owned(stream, group, id, consumer)
  return #redis.call('XPENDING', stream, group, id, id, 1, consumer) == 1
end
`;

/**
 * Marks an attempt as started; -1 when a result is already recorded (the entry must not be
 * delivered again), -2 when another worker has taken the entry over (it delivers it, not this one).
 */
const BEGIN_ATTEMPT = `${OWNED}
local ticketKey = KEYS[1]          -- the ticket's hash
local stream = KEYS[2]             -- the queue's stream
local group = ARGV[1]              -- the consumer group
local id = ARGV[2]                 -- the stream entry id
local consumer = ARGV[3]           -- the worker starting the attempt

local state = redis.call('HGET', ticketKey, 'state')
if state == 'delivered' or state == 'failed' then return -1 end
if not owned(stream, group, id, consumer) then return -2 end
redis.call('HSET', ticketKey, 'state', 'delivering')
-- An error stays only if this attempt fails: one missing on a counted attempt means it was cut short.
redis.call('HDEL', ticketKey, 'error')
return redis.call('HINCRBY', ticketKey, 'attempts', 1)
`;

/**
 * Records a result (unless one already is), then XACKs and deletes the entry, in one step: a crash
 * cannot fall between recording and acknowledging. Answers {recorded, stream length}.
 */
const FINISH = `
local stream = KEYS[1]             -- the queue's stream
local meta = KEYS[2]               -- counters: enqueued, finished
local ticketKey = KEYS[3]          -- the ticket's hash
local group = ARGV[1]              -- the consumer group
local id = ARGV[2]                 -- the stream entry id
local ttlMs = ARGV[3]              -- how long the result is kept
-- ARGV[4..]: field, value pairs of the result; none to only acknowledge

local recorded = 0
local state = redis.call('HGET', ticketKey, 'state')
if #ARGV > 3 and state ~= 'delivered' and state ~= 'failed' then
  redis.call('HSET', ticketKey, unpack(ARGV, 4))
  redis.call('PEXPIRE', ticketKey, ttlMs)
  redis.call('HINCRBY', meta, 'finished', 1)
  recorded = 1
end
redis.call('XACK', stream, group, id)
redis.call('XDEL', stream, id)
return {recorded, redis.call('XLEN', stream)}
`;

/**
 * Resets the idle time of an entry this consumer holds, and only then: an entry another worker took
 * over (this one was silent past minIdleMs) stays with it. Answers 1 when held, 0 when lost.
 */
const HEARTBEAT = `${OWNED}
local stream = KEYS[1]             -- the queue's stream
local group = ARGV[1]              -- the consumer group
local id = ARGV[2]                 -- the stream entry id
local consumer = ARGV[3]           -- the worker that holds it

if not owned(stream, group, id, consumer) then return 0 end
redis.call('XCLAIM', stream, group, consumer, 0, id, 'JUSTID')
return 1
`;

/** The scripts as commands on a client (the names are ours; defineCommand is idempotent per name). */
export interface QueueScripts {
  tollgateDeferEnqueue(stream: string, meta: string, ticketKey: string, ...args: (string | number | Buffer)[]): Promise<[number, number, string?, number?]>;
  tollgateDeferBegin(ticketKey: string, stream: string, group: string, id: string, consumer: string): Promise<number>;
  tollgateDeferHeartbeat(stream: string, group: string, id: string, consumer: string): Promise<number>;
  tollgateDeferFinish(stream: string, meta: string, ticketKey: string, ...args: (string | number | Buffer)[]): Promise<[number, number]>;
}

export function withScripts(redis: Redis | Cluster): QueueScripts {
  const client = redis as unknown as Partial<QueueScripts> & Redis;
  if (typeof client.tollgateDeferEnqueue !== 'function') {
    client.defineCommand('tollgateDeferEnqueue', { numberOfKeys: 3, lua: ENQUEUE });
    client.defineCommand('tollgateDeferBegin', { numberOfKeys: 2, lua: BEGIN_ATTEMPT });
    client.defineCommand('tollgateDeferHeartbeat', { numberOfKeys: 1, lua: HEARTBEAT });
    client.defineCommand('tollgateDeferFinish', { numberOfKeys: 3, lua: FINISH });
  }
  return client as unknown as QueueScripts;
}
