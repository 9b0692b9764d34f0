/**
 * A room in Redis, shared by every gateway node: the steps of `visit` (store.ts) in one Lua script,
 * so two nodes can neither admit past `active_users` nor admit out of turn. Every key of a room
 * carries the room's name as one `{hash tag}`, so a room lives in one Redis Cluster slot:
 *   `<prefix>{<room>}:queue`  sorted set, member `<ticket>:<issued>`, score the ticket number (arrival);
 *   `<prefix>{<room>}:seen`   sorted set, the same members, score the last poll (epoch ms);
 *   `<prefix>{<room>}:active` sorted set, member as above, score the session's expiry (epoch ms);
 *   `<prefix>{<room>}:seq`    the last ticket number issued (never expires: numbers are never reused).
 */
import type { Cluster, Redis } from 'ioredis';
import { ADMIT_BATCH, CLOCK_SKEW_MS, PRUNE_BATCH, memberOf, type RoomBounds, type RoomStore, type Visit, type VisitPlace } from './store.js';

const VISIT = `
local queue, seen, active, seq = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now = tonumber(ARGV[1])
if not now then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
local cap = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local hold = tonumber(ARGV[4])
local member = ARGV[5]            -- '' for a visitor without a valid cookie
local ticket = tonumber(ARGV[6])
local issued = tonumber(ARGV[7])  -- a waiting ticket's issue time; '' for an admitted cookie
local skew = tonumber(ARGV[10])
local mayJoin = issued ~= nil and issued <= now + skew and now - issued <= hold
local pruneBatch = tonumber(ARGV[8])
local admitBatch = tonumber(ARGV[9])

redis.call('ZREMRANGEBYSCORE', active, '-inf', now)
local stale = redis.call('ZRANGEBYSCORE', seen, '-inf', now - hold, 'LIMIT', 0, pruneBatch)
if #stale > 0 then
  redis.call('ZREM', queue, unpack(stale))
  redis.call('ZREM', seen, unpack(stale))
end

local state = 'new'
if member ~= '' then
  if redis.call('ZSCORE', active, member) then
    state = 'active'
  elseif redis.call('ZSCORE', queue, member) then
    state = 'queued'
    redis.call('ZADD', seen, now, member)
  elseif mayJoin and ticket <= tonumber(redis.call('GET', seq) or '0') then
    state = 'queued'
    redis.call('ZADD', queue, ticket, member)
    redis.call('ZADD', seen, now, member)
  end
end

local promoted = 0
local looked = 0
while looked < admitBatch and redis.call('ZCARD', active) < cap do
  looked = looked + 1
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if not head then break end
  local polled = tonumber(redis.call('ZSCORE', seen, head))
  redis.call('ZREM', queue, head)
  redis.call('ZREM', seen, head)
  if polled and polled > now - hold then
    redis.call('ZADD', active, now + hold, head)
    promoted = promoted + 1
  end
end

if member ~= '' and (state == 'active' or redis.call('ZSCORE', active, member)) then
  state = 'active'
  redis.call('ZADD', active, now + ttl, member)
end
local queueLength = redis.call('ZCARD', queue)
local position = 0
if state == 'queued' then position = redis.call('ZRANK', queue, member) + 1 end
if state == 'new' then
  ticket = redis.call('INCR', seq)
  position = queueLength + 1
end
return {state, ticket, position, queueLength, redis.call('ZCARD', active), promoted, now}
`;

interface RoomScript {
  tollgateWaitingRoomVisit(queue: string, seen: string, active: string, seq: string, ...args: (string | number)[]): Promise<[string, number, number, number, number, number, number]>;
}

/** The rooms on `client` (the store closes it when `owned`). */
export class RedisRoomStore implements RoomStore {
  private readonly client: Redis & RoomScript;

  constructor(client: Redis | Cluster, private readonly prefix = 'tollgate:wr:', private readonly owned = true) {
    this.client = client as Redis & RoomScript;
    if (typeof this.client.tollgateWaitingRoomVisit !== 'function') this.client.defineCommand('tollgateWaitingRoomVisit', { numberOfKeys: 4, lua: VISIT });
  }

  async visit(bounds: RoomBounds, place: VisitPlace | undefined, now: number | undefined): Promise<Visit> {
    const base = `${this.prefix}{${bounds.room}}`;
    const member = place === undefined ? '' : memberOf(place.ticket, place.issued);
    const [state, ticket, position, queueLength, activeSessions, promoted, at] = await this.client.tollgateWaitingRoomVisit(
      `${base}:queue`, `${base}:seen`, `${base}:active`, `${base}:seq`,
      now === undefined ? '' : Math.floor(now), bounds.activeUsers, bounds.sessionTtlMs, bounds.holdMs, member, place?.ticket ?? 0,
      place?.waiting === true ? place.issued : '', PRUNE_BATCH, ADMIT_BATCH, CLOCK_SKEW_MS,
    );
    return { state: state as Visit['state'], ticket, position, queueLength, activeSessions, promoted, now: at };
  }

  async close(): Promise<void> {
    if (this.owned) this.client.disconnect();
    return Promise.resolve();
  }
}
