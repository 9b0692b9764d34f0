--[[
  region/pull.lua: what a region has to send to one peer. Runs on the region's own Redis; atomic,
  so each snapshot is a whole, consistent set of this region's fields.

  KEYS[1]   the region's change log (sorted set: member = hash key, score = change sequence)
  KEYS[2]   the region's epoch (the id of the data this Redis holds; see the replicator)
  KEYS[3]   the region's change sequence counter
  ARGV[1]   this region's name: only its fields are sent (each region replicates its own share)
  ARGV[2]   the sequence already sent to this peer: changes after it are read
  ARGV[3]   the most hashes to read
  ARGV[4]   the epoch the replicator read its cursors in

  Returns, when the Redis lost its data since (the epoch is another or gone: a restart without
  persistence, FLUSHALL) or holds less than was sent (the sequence is below ARGV[2]: a failover to a
  replica that lagged): 'reset' and 'epoch' or 'sequence'. Otherwise: the last sequence read (ARGV[2]
  when nothing changed), the changes still waiting after this batch, the region's change sequence
  (its latest change), then per hash that still
  exists: its key, its PTTL in ms (-1 none), the number of fields n, then n field names and n values
  interleaved. A hash that expired sends nothing.
]]
local log_key, epoch_key, sequence_key = KEYS[1], KEYS[2], KEYS[3]
local own = ARGV[1] .. ':'
local after = ARGV[2]
local most = tonumber(ARGV[3])

if redis.call('GET', epoch_key) ~= ARGV[4] then return { 'reset', 'epoch' } end
local sequence = tonumber(redis.call('GET', sequence_key) or '0') or 0
if sequence < tonumber(after) then return { 'reset', 'sequence' } end

local changed = redis.call('ZRANGEBYSCORE', log_key, '(' .. after, '+inf', 'WITHSCORES', 'LIMIT', 0, most)
local last = after
local out = { last, 0, sequence }
for i = 1, #changed, 2 do
  local key = changed[i]
  last = changed[i + 1]
  local ttl = redis.call('PTTL', key)
  if ttl ~= -2 then
    local flat = redis.pcall('HGETALL', key)
    if not flat.err then
      local fields = {}
      for j = 1, #flat, 2 do
        if string.sub(flat[j], 1, #own) == own then
          fields[#fields + 1] = flat[j]
          fields[#fields + 1] = flat[j + 1]
        end
      end
      if #fields > 0 then
        out[#out + 1] = key
        out[#out + 1] = ttl
        out[#out + 1] = #fields / 2
        for j = 1, #fields do out[#out + 1] = fields[j] end
      end
    end
  end
end
out[1] = last
out[2] = redis.call('ZCOUNT', log_key, '(' .. last, '+inf')
return out
