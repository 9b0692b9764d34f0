--[[
  fixed-window.lua: a counter per window (src/algorithms/fixed-window.ts, the same steps).
  Aligned windows (the default) start at multiples of the window since the epoch; first-hit
  windows (p.first_hit) start at the key's first admitted request after its previous window ended.
  Either way the state is (count, end): the count and the instant its window ends (stored layout:
  layout.lua), so the window is [end - window, end). A count of 0 is a fresh key.
  With count_rejected a denied hit is counted too, so the count may pass the capacity.
  A calendar window (p.calendar, src/algorithms/calendar.ts) has no length: Lua has no time-zone
  data, so the caller sends three consecutive period boundaries b0 < b1 < b2 around its own clock
  and the period is the one of [b0, b1), [b1, b2) holding `now`; a `now` outside [b0, b2) (the
  caller's and Redis's clocks half a period apart) is refused, deciding nothing.
]]
-- The calendar period [start, end) holding now, from the boundaries the caller sent; nil outside them.
local function calendar_period(b, now)
  if now < b[1] or now >= b[3] then return nil end
  if now < b[2] then return b[1], b[2] end
  return b[2], b[3]
end

local function decide_fixed_window(stored_count, stored_end, now, cost, p)
  local window, capacity = p.window, p.capacity
  local start = now
  local count = 0
  if p.calendar then
    local period_end
    start, period_end = calendar_period(p.calendar, now)
    if start == nil then return false, 0, now, 0, -1, REASON_CLOCK_OUTSIDE_PERIODS end
    -- The stored period, or a later one a clock that went back keeps counting in; window is its length.
    if stored_count and stored_end >= period_end then period_end, count = stored_end, stored_count end
    window = period_end - start
  elseif p.first_hit then
    -- The stored window goes on until it ends; a clock that went back keeps counting in it.
    if stored_count and stored_count > 0 and now < stored_end then start, count = stored_end - window, stored_count end
  else
    start = floor_div(now, window) * window
    if stored_count then
      local stored_start = stored_end - window
      -- A clock that went back keeps counting in the later window.
      if stored_start > start then start = stored_start end
      if stored_start == start then count = stored_count end
    end
  end
  local window_end = start + window
  local reset_at = now
  if count > 0 then reset_at = window_end end
  if cost > capacity then
    -- Check back after the window's (a calendar unit's nominal) length, as the memory store says.
    return false, capacity - count, reset_at, p.window, -1, REASON_COST_EXCEEDS_CAPACITY
  end
  if count + cost > capacity then
    -- count_rejected: the denied hit is counted too (envoy's counting); the count may pass capacity.
    if p.count_rejected then
      return false, capacity - count, window_end, window_end - now, -1, REASON_NONE, count + cost
    end
    return false, capacity - count, reset_at, window_end - now, -1, REASON_NONE
  end
  -- The state written is the new count; its end is reset_at, the window's end.
  return true, capacity - count - cost, window_end, 0, -1, REASON_NONE, count + cost
end
