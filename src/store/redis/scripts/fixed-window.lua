--[[
  fixed-window.lua: a counter per window (src/algorithms/fixed-window.ts, the same steps).
  Aligned windows (the default) start at multiples of the window since the epoch; first-hit
  windows (p.first_hit) start at the key's first admitted request after its previous window ended.
  Either way the state is (count, end): the count and the instant its window ends (stored layout:
  layout.lua), so the window is [end - window, end). A count of 0 is a fresh key.
  With count_rejected a denied hit is counted too, so the count may pass the capacity.
]]
local function decide_fixed_window(stored_count, stored_end, now, cost, p)
  local window, capacity = p.window, p.capacity
  local start = now
  local count = 0
  if p.first_hit then
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
    return false, capacity - count, reset_at, window, -1, REASON_COST_EXCEEDS_CAPACITY
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
