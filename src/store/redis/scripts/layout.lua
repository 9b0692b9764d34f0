--[[
  layout.lua: how fixed-window, token-bucket, leaky-bucket and gcra state is stored (layout 2:
  keys named <prefix>{<key>}<tag><window>, docs/redis.md "Keys and values"). Their state is two
  integers (v, end): v the count (fixed-window) or the remainder of the bucket's TAT in 1/limit ms
  (the others), end the instant the state stops mattering: the window's end, or ceil(TAT). A key
  is kept exactly until then, so end IS the key's expiry: the value is v alone (an integer, which
  Redis stores integer-encoded: 16 bytes, none below 10,000) and the key expires at end (SET PXAT),
  read back with PEXPIRETIME (Redis 7.0). A key written with an explicit `now` must outlive its end
  in real time (replays, decide.lua), so it holds the string "v end" instead; both read the same.
]]
-- (v, end) of a stored value, or nil when it is neither form.
local function read_pair(key, stored)
  if find(stored, ' ', 1, true) then
    local ok, v, stop = parse_state(stored, 2)
    if ok and v >= 0 and stop >= 0 then return v, stop end
    return nil
  end
  local v = parse_integer(stored)
  if v == nil or v < 0 then return nil end
  -- -1: the key has no expiry, so it was not written in this layout.
  local stop = call('PEXPIRETIME', key)
  if stop < 0 then return nil end
  return v, stop
end

-- The state of a string key: REASON_NONE and its fields, (v, end) in this layout or
-- (current, index, previous) for a sliding window, none when the key is absent; or the reason it
-- cannot be read.
local function read_stored(key, sliding_window)
  local stored = pcall_redis('GET', key)
  if not stored then return REASON_NONE end
  if type(stored) == 'table' then return REASON_WRONG_TYPE end
  if sliding_window then
    local ok, current, index, previous = parse_state(stored, 3)
    if not ok then return REASON_CORRUPT_STATE end
    return REASON_NONE, current, index, previous
  end
  local v, stop = read_pair(key, stored)
  if v == nil then return REASON_CORRUPT_STATE end
  return REASON_NONE, v, stop
end

-- Stores (v, end), end > now. extra_ms > 0 (an explicit `now`): the key lives that much past end,
-- in real time, and keeps end in its value.
local function write_pair(key, v, stop, now, extra_ms)
  if extra_ms == 0 then
    call('SET', key, format('%d', v), 'PXAT', format('%d', stop))
    return
  end
  local ttl = stop - now
  if ttl < 1 then ttl = 1 end
  call('SET', key, format('%d %d', v, stop), 'PX', ttl + extra_ms)
end
