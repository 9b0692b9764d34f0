--[[
  adjust.lua: settling a reservation on the stored state (src/algorithms/adjust.ts, the same
  steps; docs/semantics.md "Reserve then settle"). `units` < 0 refunds: a window counter gives back
  only in the reservation's window (`mark`, its start) while that window still counts, a bucket or
  GCRA at once, never past a full bucket. `units` > 0 charges, now, whatever the limit, in the
  window of `now`, at most one capacity into debt (the state holds at most twice the capacity).
  Each writes the new state (or deletes a key left as a fresh key's) and returns nothing.
]]
-- `count` moved by `units`: a refund takes at most what is there, a charge stops at `cap` (never lowering a count past it).
local function moved(count, units, cap)
  if units < 0 then
    if count + units < 0 then return 0 end
    return count + units
  end
  local next_count = count + units
  if next_count > cap then next_count = cap end
  if next_count < count then next_count = count end
  return next_count
end

-- A calendar window (p.calendar): its periods are named by their end (mark); the caller checked
-- that a period of the boundaries holds `now`.
local function adjust_calendar_window(key, stored_count, stored_end, now, units, mark, p, extra_ttl)
  local _, now_end = calendar_period(p.calendar, now)
  if units < 0 then
    -- Only the reservation's own period, while it runs (a clock that went back stays in it).
    if not stored_count or stored_count == 0 or stored_end ~= mark or now_end > mark then return end
    local left = moved(stored_count, units, 2 * p.capacity)
    if left == 0 then call('DEL', key) else write_pair(key, left, stored_end, now, extra_ttl) end
    return
  end
  local stop, count = now_end, 0
  if stored_count and stored_count > 0 and stored_end >= now_end then stop, count = stored_end, stored_count end
  write_pair(key, moved(count, units, 2 * p.capacity), stop, now, extra_ttl)
end

local function adjust_fixed_window(key, stored_count, stored_end, now, units, mark, p, extra_ttl)
  if p.calendar then return adjust_calendar_window(key, stored_count, stored_end, now, units, mark, p, extra_ttl) end
  local window = p.window
  if units < 0 then
    if not stored_count or stored_count == 0 or stored_end - window ~= mark then return end
    local live
    if p.first_hit then live = now < stored_end else live = floor_div(now, window) * window <= mark end
    if not live then return end
    local left = moved(stored_count, units, 2 * p.capacity)
    if left == 0 then call('DEL', key) else write_pair(key, left, stored_end, now, extra_ttl) end
    return
  end
  local start, count = now, 0
  if p.first_hit then
    if stored_count and stored_count > 0 and now < stored_end then start, count = stored_end - window, stored_count end
  else
    start = floor_div(now, window) * window
    if stored_count and stored_count > 0 then
      if stored_end - window > start then start = stored_end - window end
      if stored_end - window == start then count = stored_count end
    end
  end
  write_pair(key, moved(count, units, 2 * p.capacity), start + window, now, extra_ttl)
end

-- A sliding window's (current, index, previous), written with the key living until its reset.
local function write_sliding_window(key, current, index, previous, now, p, extra_ttl)
  -- Emptied: a fresh key's on Redis TIME; kept on an explicit `now`, whose clock may go back into it
  -- (as the memory store keeps its state).
  if current == 0 and previous == 0 and extra_ttl == 0 then
    call('DEL', key)
    return
  end
  local _, _, reset_at = decide_sliding_window(current, index, previous, now, 0, p)
  local ttl = reset_at - now
  if ttl < 1 then ttl = 1 end
  call('SET', key, format('%d %d %d', current, index, previous), 'PX', ttl + extra_ttl)
end

local function adjust_sliding_window(key, s_current, s_index, s_previous, now, units, mark, p, extra_ttl)
  local window = p.window
  local now_index = floor_div(now, window)
  if s_current and s_index > now_index then now_index = s_index end
  if units < 0 then
    -- The reservation's window counts while it is the current or the previous one.
    if not s_current or now_index * window - mark >= 2 * window then return end
    if s_index * window == mark and s_current > 0 then
      write_sliding_window(key, moved(s_current, units, 2 * p.capacity), s_index, s_previous, now, p, extra_ttl)
    elseif s_index * window == mark + window and s_previous > 0 then
      write_sliding_window(key, s_current, s_index, moved(s_previous, units, 2 * p.capacity), now, p, extra_ttl)
    end
    return
  end
  local current, previous = 0, 0
  if s_current and s_index == now_index then
    current, previous = s_current, s_previous
  elseif s_current and s_index == now_index - 1 then
    previous = s_current
  end
  write_sliding_window(key, moved(current, units, 2 * p.capacity), now_index, previous, now, p, extra_ttl)
end

-- Token bucket, leaky bucket and GCRA, stored alike as (remainder, end) of the bucket's TAT
-- (level.lua): how far TAT is ahead of `now` in 1/limit ms, moved by units x window.
local function adjust_level(key, stored_remainder, stored_end, now, units, p, extra_ttl)
  local window, limit = p.window, p.limit
  local ahead = 0
  if stored_remainder then
    local tat_ms, remainder = tat_whole_ms(stored_remainder, stored_end)
    ahead = (tat_ms - now) * limit + remainder
    if ahead < 0 then ahead = 0 end
  end
  if units < 0 and ahead == 0 then return end
  local next_ahead = moved(ahead, units * window, 2 * p.capacity * window)
  if next_ahead == 0 and extra_ttl == 0 then
    call('DEL', key)
    return
  end
  -- An emptied bucket on an explicit `now` keeps TAT = now (its clock may go back into it, as the memory store's does).
  write_pair(key, next_ahead - floor_div(next_ahead, limit) * limit, now + ceil_div(next_ahead, limit), now, extra_ttl)
end
