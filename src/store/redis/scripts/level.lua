--[[
  level.lua: the continuous bucket behind token-bucket and leaky-bucket (docs/semantics.md).
  One request is worth window_ms units; the level drains `limit` units per ms.
  State (string "level last"): level in units after the last admitted request, and its time (ms).

  decide_level(state, now, cost, p, shaping) -> result table:
    allowed, raw_remaining, reset_at, retry_after, delay (-1 unless shaping), reason,
    write (new state string or nil)
]]
local function decide_level(state, now, cost, p, shaping)
  local level_last, last = 0, 0
  if state then
    level_last, last = state[1], state[2]
  end
  local level = level_last - (now - last) * p.limit
  if level < 0 then level = 0 end
  local full = p.capacity * p.window
  local function whole_requests(at_level)
    if full > at_level then return floor_div(full - at_level, p.window) end
    return 0
  end
  local no_delay = -1
  if shaping then no_delay = 0 end
  if cost > p.capacity then
    return { false, whole_requests(level), now + ceil_div(level, p.limit), p.window, no_delay, REASON_COST_EXCEEDS_CAPACITY }
  end
  local units = cost * p.window
  if level + units > full then
    return { false, whole_requests(level), now + ceil_div(level, p.limit), ceil_div(level + units - full, p.limit), no_delay, REASON_NONE }
  end
  local next_level = level + units
  local delay = -1
  if shaping then delay = ceil_div(level, p.limit) end
  return { true, whole_requests(next_level), now + ceil_div(next_level, p.limit), 0, delay, REASON_NONE,
    format('%d %d', next_level, now) }
end
