--[[
  slots.lua: concurrency slots (src/store/slots.ts), one key per call so a Cluster routes it by
  that key. KEYS[1] is a sorted set: permit id -> when its slot expires (ms). Expired members are
  removed first, in the same script, so a holder that died never counts after its ttl.

  ARGV[1]  'acquire', 'release' or 'held'
  ARGV[2]  now: '' to use Redis TIME (so nodes with skewed clocks agree), else epoch ms
  ARGV[3]  the permit id
  ARGV[4]  acquire: the most slots held at once (>= 1)
  ARGV[5]  acquire: the slot's ttl in ms (>= 1)

  acquire answers {allowed 0/1, held, retry_after ms, expires_at, now};
  release answers {released 0/1, held, now}; held answers {held, now} (a look: it only drops
  expired members).
  A repeated acquire with an id already holding a slot renews it (it counts once).
]]
local call = redis.call
local key = KEYS[1]

local function argument_error(what)
  return redis.error_reply('ERR tollgate: slots argument ' .. what .. ' is not valid')
end

local now
if ARGV[2] == '' then
  local time = call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
else
  now = tonumber(ARGV[2])
  if now == nil or now < 0 then return argument_error('now') end
end
local id = ARGV[3]

call('ZREMRANGEBYSCORE', key, '-inf', now)

if ARGV[1] == 'held' then return {call('ZCARD', key), now} end
if ARGV[1] == 'release' then
  local released = call('ZREM', key, id)
  return {released, call('ZCARD', key), now}
end
if ARGV[1] ~= 'acquire' then return argument_error('operation') end

local limit = tonumber(ARGV[4])
local ttl = tonumber(ARGV[5])
if limit == nil or limit < 1 then return argument_error('limit') end
if ttl == nil or ttl < 1 then return argument_error('ttl') end

local held = call('ZCARD', key)
local mine = call('ZSCORE', key, id)
if mine or held < limit then
  local expires_at = now + ttl
  call('ZADD', key, expires_at, id)
  if not mine then held = held + 1 end
  -- The set lives as long as its last slot: nothing is left behind when every holder is gone.
  local last = call('ZRANGE', key, -1, -1, 'WITHSCORES')
  call('PEXPIRE', key, math.max(1, tonumber(last[2]) - now))
  return {1, held, 0, expires_at, now}
end
local first = call('ZRANGE', key, 0, 0, 'WITHSCORES')
return {0, held, tonumber(first[2]) - now, 0, now}
