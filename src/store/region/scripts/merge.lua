--[[
  region/merge.lua: applies another region's fields to this region's hashes, keeping the larger of
  the stored and the incoming count of each field. A field only ever grows at its source, so this
  merge is idempotent (a replay changes nothing), commutative (batches may arrive in any order) and
  loses nothing (the largest value seen is the latest): each hash is a G-counter CRDT.
  Nothing here is logged for replication: a region sends only the fields it counted itself.

  KEYS[i]   the hashes to merge into
  ARGV      per key, in order: its PTTL at the source in ms (-1 none), the number of fields n, then
            n field names and n values interleaved

  Returns the number of fields raised, then the number of keys skipped because they hold another
  type (another application's key: left alone).
]]
local raised, skipped = 0, 0
local at = 1
for i = 1, #KEYS do
  local key = KEYS[i]
  local ttl, n = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
  at = at + 2
  local kind = redis.call('TYPE', key).ok
  if kind ~= 'hash' and kind ~= 'none' then
    skipped = skipped + 1
  else
    for j = 1, n do
      local field, incoming = ARGV[at + 2 * (j - 1)], tonumber(ARGV[at + 2 * (j - 1) + 1])
      local stored = tonumber(redis.call('HGET', key, field) or '0') or 0
      if incoming ~= nil and incoming > stored then
        redis.call('HSET', key, field, incoming)
        raised = raised + 1
      end
    end
    if ttl ~= nil and ttl > 0 and redis.call('EXISTS', key) == 1 and redis.call('PTTL', key) < ttl then
      redis.call('PEXPIRE', key, ttl)
    end
  end
  at = at + 2 * n
end
return { raised, skipped }
