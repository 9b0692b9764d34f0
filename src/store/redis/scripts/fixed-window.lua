--[[
  fixed-window.lua: a counter per window, windows aligned to multiples of the window since the
  epoch. State (string "count start"): the count and the start (ms) of the window it belongs to.
]]
local function decide_fixed_window(state, now, cost, p)
  local start = floor_div(now, p.window) * p.window
  local stored_count, stored_start = 0, -1
  if state then
    stored_count, stored_start = state[1], state[2]
  end
  -- A clock that went back keeps counting in the later window.
  if stored_start > start then start = stored_start end
  local count = 0
  if stored_start == start then count = stored_count end
  local window_end = start + p.window
  local reset_at = now
  if count > 0 then reset_at = window_end end
  if cost > p.capacity then
    return { false, p.capacity - count, reset_at, p.window, -1, REASON_COST_EXCEEDS_CAPACITY }
  end
  if count + cost > p.capacity then
    return { false, p.capacity - count, reset_at, window_end - now, -1, REASON_NONE }
  end
  return { true, p.capacity - count - cost, window_end, 0, -1, REASON_NONE,
    format('%d %d', count + cost, start) }
end
