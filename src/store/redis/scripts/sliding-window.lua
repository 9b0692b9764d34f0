--[[
  sliding-window.lua: sliding window counter. estimate = current + floor(previous x the share of
  the previous window still inside the rolling window). State (string "current index previous"):
  the current window's count and index (its start is index x window), and the previous count.
]]
local function sliding_window_reset(now, start, window, current, previous)
  if current > 0 then return start + 2 * window - floor_div(window - 1, current) end
  if previous > 0 then
    local reset = start + window - floor_div(window - 1, previous)
    if reset > now then return reset end
  end
  return now
end

-- floor((a * b - 1) / m) for a, b >= 1 (wide policies; sliding-window.ts floorOfProductLessOne).
local function floor_of_product_less_one(a, b, m)
  local q, r = mul_divmod(a, b, m)
  if r > 0 then return q end
  return q - 1
end

local function decide_sliding_window(stored_current, stored_index, stored_previous, now, cost, p)
  local window, capacity = p.window, p.capacity
  local start = floor_div(now, window) * window
  local elapsed = now - start
  local current, previous = 0, 0
  if stored_current then
    local stored_start = stored_index * window
    if stored_start > start then
      -- The clock went back: keep counting in the later window, as if at its very start.
      start = stored_start
      elapsed = 0
    end
    if stored_start == start then
      current, previous = stored_current, stored_previous
    elseif stored_start == start - window then
      previous = stored_current
    end
  end
  local previous_weighted = 0
  if previous > 0 then
    if p.wide then
      previous_weighted = mul_divmod(previous, window - elapsed, window)
    else
      previous_weighted = floor_div(previous * (window - elapsed), window)
    end
  end
  local estimate = current + previous_weighted
  if cost > capacity then
    return false, capacity - estimate, sliding_window_reset(now, start, window, current, previous), window, -1, REASON_COST_EXCEEDS_CAPACITY
  end
  if estimate + cost > capacity then
    local retry_after
    local room = capacity - cost - current
    if room >= 0 and previous > 0 then
      local offset
      if p.wide then
        offset = window - floor_of_product_less_one(room + 1, window, previous)
      else
        offset = window - floor_div((room + 1) * window - 1, previous)
      end
      if offset < window then retry_after = start + offset - now end
    end
    if retry_after == nil then
      local offset = 0
      if current > 0 then
        local count = capacity - cost + 1
        if not p.wide then
          offset = window - floor_div(count * window - 1, current)
        elseif count <= current then
          offset = window - floor_of_product_less_one(count, window, current)
        end
        if offset < 0 then offset = 0 end
      end
      retry_after = start + window + offset - now
    end
    return false, capacity - estimate, sliding_window_reset(now, start, window, current, previous), retry_after, -1, REASON_NONE
  end
  local next_current = current + cost
  return true, capacity - next_current - previous_weighted, sliding_window_reset(now, start, window, next_current, previous), 0, -1, REASON_NONE,
    format('%d %d %d', next_current, floor_div(start, window), previous)
end
