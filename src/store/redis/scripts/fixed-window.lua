--[[
  fixed-window.lua: a counter per window, windows aligned to multiples of the window since the
  epoch. With count_rejected a denied hit is counted too, so the count may pass the capacity. State (string "count index"): the count and the index of the window it belongs to (its
  start is index x window: a short number keeps the value in Redis's smallest string allocation).
]]
local function decide_fixed_window(stored_count, stored_index, now, cost, p)
  local window, capacity = p.window, p.capacity
  local index = floor_div(now, window)
  local start = index * window
  local count = 0
  if stored_count then
    local stored_start = stored_index * window
    -- A clock that went back keeps counting in the later window.
    if stored_start > start then start, index = stored_start, stored_index end
    if stored_start == start then count = stored_count end
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
      return false, capacity - count, window_end, window_end - now, -1, REASON_NONE, format('%d %d', count + cost, index)
    end
    return false, capacity - count, reset_at, window_end - now, -1, REASON_NONE
  end
  return true, capacity - count - cost, window_end, 0, -1, REASON_NONE, format('%d %d', count + cost, index)
end
