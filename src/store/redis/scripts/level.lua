--[[
  level.lua: the continuous bucket behind token-bucket and leaky-bucket (docs/semantics.md).
  One request is worth `window` units; the level drains `limit` units per ms.
  State (string "level last"): level in units after the last admitted request, and its time (ms).
  A wide policy writes "r-2^52 -1-tat_ms" instead (empty at tat_ms + r / limit; wide-level.lua):
  a plain state is never negative, so each reads the other's state exactly.

  Every algorithm function takes (stored values or nil, now, cost, policy) and returns, as multiple
  values (no tables on the hot path): allowed, raw_remaining, reset_at, retry_after,
  delay (-1 unless shaping), reason, write (the new state string, or nil to record nothing).
]]
local function level_whole_requests(full, level, window)
  if full > level then return floor_div(full - level, window) end
  return 0
end

local function decide_level(stored_level, last, now, cost, p, shaping)
  if p.wide then return decide_wide_level_state(stored_level, last, now, cost, p, shaping) end
  local level = 0
  if stored_level then
    level = stored_level - (now - last) * p.limit
    if level < 0 then
      -- A wide state ("r-2^52 -1-t") always computes as negative here.
      if last < 0 then return decide_wide_level_state(stored_level, last, now, cost, p, shaping) end
      level = 0
    end
  end
  local window, limit, capacity = p.window, p.limit, p.capacity
  local full = capacity * window
  local no_delay = -1
  if shaping then no_delay = 0 end
  if cost > capacity then
    return false, level_whole_requests(full, level, window), now + ceil_div(level, limit), window, no_delay, REASON_COST_EXCEEDS_CAPACITY
  end
  local units = cost * window
  if level + units > full then
    return false, level_whole_requests(full, level, window), now + ceil_div(level, limit),
      ceil_div(level + units - full, limit), no_delay, REASON_NONE
  end
  local next_level = level + units
  local delay = -1
  if shaping then delay = ceil_div(level, limit) end
  return true, level_whole_requests(full, next_level, window), now + ceil_div(next_level, limit), 0, delay, REASON_NONE,
    format('%d %d', next_level, now)
end
