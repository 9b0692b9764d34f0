--[[
  level.lua: the continuous bucket behind token-bucket and leaky-bucket (docs/semantics.md).
  One request is worth `window` units; the level drains `limit` units per ms. The bucket is kept
  as the instant it is empty, TAT = whole ms + remainder / limit, stored as (remainder, end) with
  end = ceil(TAT) (layout.lua), like gcra.lua: the level at `now` is (TAT - now) x limit units.

  Every algorithm function takes (stored values or nil, now, cost, policy) and returns, as multiple
  values (no tables on the hot path): allowed, raw_remaining, reset_at, retry_after,
  delay (-1 unless shaping), reason, write (the integer to store, whose end is reset_at; or nil
  to record nothing).
]]
local function level_whole_requests(full, level, window)
  if full > level then return floor_div(full - level, window) end
  return 0
end

-- (TAT's whole ms, remainder) of a stored (remainder, end): end = ceil(TAT). (0, 0) for no state.
local function tat_whole_ms(stored_remainder, stored_end)
  if not stored_remainder then return 0, 0 end
  if stored_remainder > 0 then return stored_end - 1, stored_remainder end
  return stored_end, 0
end

local function decide_level(stored_remainder, stored_end, now, cost, p, shaping)
  local tat_ms, remainder = tat_whole_ms(stored_remainder, stored_end)
  if p.wide then return decide_wide_level(tat_ms, remainder, now, cost, p, shaping) end
  local window, limit, capacity = p.window, p.limit, p.capacity
  local full = capacity * window
  local level = 0
  if stored_remainder then
    level = (tat_ms - now) * limit + remainder
    if level < 0 then level = 0 end
    -- A backlog beyond the capacity (left by a wide policy or a lower limit): the wide arithmetic
    -- stays exact where this product may not.
    if level > full then return decide_wide_level(tat_ms, remainder, now, cost, p, shaping) end
  end
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
    next_level - floor_div(next_level, limit) * limit
end
