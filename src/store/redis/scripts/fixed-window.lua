--[[
  fixed-window.lua: a counter per window (src/algorithms/fixed-window.ts, the same steps).
  Aligned windows (the default) start at multiples of the window since the epoch; their state
  (string "count index") holds the count and the index of the window it belongs to (its start is
  index x window: a short number keeps the value in Redis's smallest string allocation).
  First-hit windows (p.first_hit) start at the key's first admitted request after its previous
  window ended; their state (string "count start", under a key of their own) holds the start in ms.
  With count_rejected a denied hit is counted too, so the count may pass the capacity.
]]
local function decide_fixed_window(stored_count, stored_mark, now, cost, p)
  local window, capacity = p.window, p.capacity
  local start, mark = now, now
  local count = 0
  if p.first_hit then
    -- The stored window goes on until it ends; a clock that went back keeps counting in it.
    if stored_count and stored_count > 0 and now < stored_mark + window then start, mark, count = stored_mark, stored_mark, stored_count end
  else
    mark = floor_div(now, window)
    start = mark * window
    if stored_count then
      local stored_start = stored_mark * window
      -- A clock that went back keeps counting in the later window.
      if stored_start > start then start, mark = stored_start, stored_mark end
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
      return false, capacity - count, window_end, window_end - now, -1, REASON_NONE, format('%d %d', count + cost, mark)
    end
    return false, capacity - count, reset_at, window_end - now, -1, REASON_NONE
  end
  return true, capacity - count - cost, window_end, 0, -1, REASON_NONE, format('%d %d', count + cost, mark)
end
