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

-- A sliding window of precision N: state "index c0 ... ck" (sliding-window-buckets.lua), trailing
-- zero counts left out, the key living until the estimate has decayed to 0.
local function write_buckets(key, index, counts, now, p, extra_ttl)
  local last = p.precision + 1
  while last > 1 and counts[last] == 0 do last = last - 1 end
  -- Emptied: a fresh key's on Redis TIME; kept on an explicit `now` (as write_sliding_window).
  if counts[last] == 0 and extra_ttl == 0 then
    call('DEL', key)
    return
  end
  local fields = { format('%d', index) }
  for i = 1, last do fields[i + 1] = format('%d', counts[i]) end
  local ttl = buckets_reset(now, index, counts, p) - now
  if ttl < 1 then ttl = 1 end
  call('SET', key, table.concat(fields, ' '), 'PX', ttl + extra_ttl)
end

-- A refund from the reservation's bucket (index `mark`) while the estimate still reads it (one of
-- the N + 1 newest positions); a charge into the bucket of `now`.
local function adjust_sliding_buckets(key, stored_index, stored_counts, now, units, mark, p, extra_ttl)
  local precision = p.precision
  local bucket = mul_divmod(now, precision, p.window)
  if stored_index and stored_index > bucket then bucket = stored_index end
  if units < 0 then
    if not stored_index then return end
    local position = stored_index - mark
    if bucket - mark > precision or position < 0 or position > precision or stored_counts[position + 1] == 0 then return end
    stored_counts[position + 1] = moved(stored_counts[position + 1], units, 2 * p.capacity)
    write_buckets(key, stored_index, stored_counts, now, p, extra_ttl)
    return
  end
  local slid = precision + 1
  if stored_index then slid = bucket - stored_index end
  local counts = {}
  for position = 0, precision do
    counts[position + 1] = 0
    if position >= slid then counts[position + 1] = stored_counts[position - slid + 1] end
  end
  counts[1] = moved(counts[1], units, 2 * p.capacity)
  write_buckets(key, bucket, counts, now, p, extra_ttl)
end

-- A sliding log (sliding-log.lua: a LIST of "time cumulative weight", read at its ends). A charge
-- is logged at `now` as a decision logs it (the log holding at most twice the capacity).
local function charge_sliding_log(key, now, units, p, extra_ttl)
  local _, remaining = decide_sliding_log(key, now, 0, p)
  local total = p.capacity - remaining
  local added = moved(total, units, 2 * p.capacity) - total
  if added == 0 then return end
  local _, _, reset_at, _, _, _, write = decide_sliding_log(key, now, added, { window = p.window, capacity = MAX_INTEGER, count_rejected = false })
  local ttl = reset_at - now
  if ttl < 1 then ttl = 1 end
  write_sliding_log(key, write, ttl + extra_ttl)
end

-- The entry at 0-based `index` of a log of `n` entries as { time, cumulative, weight } (LINDEX from
-- the nearer end), or nil when it is not one.
local function log_entry(key, index, n)
  local from = index
  if index + index >= n then from = index - n end
  local ok, t, c, w = parse_state(call('LINDEX', key, from) or '', 3)
  if not ok then return nil end
  return { t, c, w }
end

-- The position of the entry logged at `time` (entry times strictly increase) and the entry: the
-- newest first (a settle soon after its reserve), else bisection. nil when none is.
local function find_log_entry(key, time, n)
  local newest = log_entry(key, n - 1, n)
  if newest == nil or newest[1] < time then return nil end
  if newest[1] == time then return n - 1, newest end
  local low, high = 0, n - 2
  while low <= high do
    local mid = floor((low + high) / 2)
    local entry = log_entry(key, mid, n)
    if entry == nil then return nil end
    if entry[1] == time then return mid, entry end
    if entry[1] < time then low = mid + 1 else high = mid - 1 end
  end
  return nil
end

-- LRANGE first..last, each entry's cumulative moved by `by`; nil if one is not an entry.
local function shifted_entries(key, first, last, by)
  local out = {}
  for i, text in ipairs(call('LRANGE', key, first, last)) do
    local ok, t, c, w = parse_state(text, 3)
    if not ok then return nil end
    out[i] = format('%d %d %d', t, c + by, w)
  end
  return out
end

-- Pushes `entries` back at the head (LPUSH, the last first) or the tail (RPUSH), in chunks of 1,000
-- arguments (Lua's unpack has a stack limit).
local log_push_chunk = 1000
local function push_entries(key, entries, at_head)
  local count = #entries
  local done = 0
  while done < count do
    local chunk = {}
    local size = math.min(log_push_chunk, count - done)
    for i = 1, size do
      if at_head then chunk[i] = entries[count - done - i + 1] else chunk[i] = entries[done + i] end
    end
    if at_head then call('LPUSH', key, unpack(chunk)) else call('RPUSH', key, unpack(chunk)) end
    done = done + size
  end
end

--[[
  A refund of `taken` = min(-units, its weight) from the reservation's own entry (logged at `mark`)
  while it is in the rolling window. Every total is read at the log's ends as cumulative(newest) -
  (cumulative(oldest) - weight(oldest)), so the entry's weight is lowered and, to keep each entry's
  cumulative the running total, either every older entry's cumulative is raised by `taken` or every
  newer one's lowered: the shorter side, rewritten with one LRANGE, one LTRIM and one push per
  1,000 entries. An entry left weighing nothing is removed (every entry weighs at least 1).
  O(log n) LINDEX to find it, O(min(older, newer)) entries moved (docs/semantics.md).
]]
local function refund_sliding_log(key, now, units, mark, p)
  if mark <= now - p.window then return end
  local n = call('LLEN', key)
  if n == 0 then return end
  local position, entry = find_log_entry(key, mark, n)
  if position == nil then return end
  local taken = -units
  if taken > entry[3] then taken = entry[3] end
  local removed = taken == entry[3]
  local older, newer = position, n - 1 - position
  if older <= newer then
    local moved_older = {}
    if older > 0 then moved_older = shifted_entries(key, 0, position - 1, taken) end
    if moved_older == nil then return end
    if removed then
      call('LTRIM', key, position + 1, -1)
    else
      call('LSET', key, position, format('%d %d %d', entry[1], entry[2], entry[3] - taken))
      if older > 0 then call('LTRIM', key, position, -1) end
    end
    push_entries(key, moved_older, true)
    return
  end
  if newer == 0 then
    -- The newest entry (the common case): O(1).
    if removed then call('RPOP', key) else call('LSET', key, -1, format('%d %d %d', entry[1], entry[2] - taken, entry[3] - taken)) end
    return
  end
  local moved_newer = shifted_entries(key, position + 1, -1, -taken)
  if moved_newer == nil then return end
  if removed then
    call('LTRIM', key, 0, position - 1)
  else
    call('LSET', key, position, format('%d %d %d', entry[1], entry[2] - taken, entry[3] - taken))
    call('LTRIM', key, 0, position)
  end
  push_entries(key, moved_newer, false)
end
