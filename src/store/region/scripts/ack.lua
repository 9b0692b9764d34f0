--[[
  region/ack.lua: records that a peer has every change up to a sequence, and trims the change log
  below the sequence every peer has. Runs on the region's own Redis.

  KEYS[1]   the region's change log (sorted set)
  KEYS[2]   the region's cursors (hash: peer region -> sequence it has)
  KEYS[3]   the region's epoch
  ARGV[1]   the epoch the changes were read in: an acknowledgement of an earlier epoch's changes
            records nothing (its sequences name other changes now)
  ARGV[2]   the peer; ARGV[3] the sequence it now has
  ARGV[4..] every peer of the region (the log is trimmed to the lowest of their cursors)

  Returns the number of log entries trimmed, or -1 when the epoch is another.
]]
local log_key, cursors_key, epoch_key = KEYS[1], KEYS[2], KEYS[3]
if redis.call('GET', epoch_key) ~= ARGV[1] then return -1 end
local peer, acked = ARGV[2], tonumber(ARGV[3])
local stored = tonumber(redis.call('HGET', cursors_key, peer) or '0') or 0
if acked > stored then redis.call('HSET', cursors_key, peer, acked) end
local lowest = nil
for i = 4, #ARGV do
  local cursor = tonumber(redis.call('HGET', cursors_key, ARGV[i]) or '0') or 0
  if lowest == nil or cursor < lowest then lowest = cursor end
end
if lowest == nil or lowest <= 0 then return 0 end
return redis.call('ZREMRANGEBYSCORE', log_key, '-inf', lowest)
