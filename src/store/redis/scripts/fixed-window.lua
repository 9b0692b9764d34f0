--[[
  fixed-window.lua: a counter per window, windows aligned to multiples of the window since the
  epoch. State (string "count start"): the count and the start (ms) of the window it belongs to.
]]
local function decide_fixed_window(stored_count, stored_start, now, cost, p)
  local window, capacity = p.window, p.capacity
  local start = floor_div(now, window) * window
  local count = 0
  if stored_count then
    -- A clock that went back keeps counting in the later window.
    if stored_start > start then start = stored_start end
    if stored_start == start then count = stored_count end
  end
  local window_end = start + window
  local reset_at = now
  if count > 0 then reset_at = window_end end
  if cost > capacity then
    return false, capacity - count, reset_at, window, -1, REASON_COST_EXCEEDS_CAPACITY
  end
  if count + cost > capacity then
    return false, capacity - count, reset_at, window_end - now, -1, REASON_NONE
  end
  return true, capacity - count - cost, window_end, 0, -1, REASON_NONE, format('%d %d', count + cost, start)
end
