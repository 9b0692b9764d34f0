--[[
  sliding-window-buckets.lua: sliding window counter of precision N > 1 (src/algorithms/
  sliding-window-buckets.ts, the same steps). The window is counted in N buckets; the estimate is
  the N newest buckets whole plus the bucket before them weighted by the share of it still inside
  the rolling window, rounded down. Time is scaled by N so a bucket is exactly W units long: the
  instant t ms is t x N, in bucket floor(t x N / W) at offset (t x N) mod W.
  State (string "index c0 c1 ... ck", k <= N): the newest bucket's index, then its count and the
  older buckets' counts, newest first; trailing zero counts are left out (they read as 0).
]]

-- The index and the N + 1 counts (a table, newest first) of a state string; nil if it is anything else.
local function parse_buckets(text, precision)
  local index
  local counts = {}
  local n = 0
  for field in string.gmatch(text, '[^ ]+') do
    local value = parse_integer(field)
    if value == nil or value < 0 then return nil end
    if index == nil then
      index = value
    else
      n = n + 1
      if n > precision + 1 then return nil end
      counts[n] = value
    end
  end
  if n == 0 then return nil end
  for i = n + 1, precision + 1 do counts[i] = 0 end
  return index, counts
end

-- The first whole ms at or after scaled offset `offset` (0 <= offset <= W) into bucket `bucket`.
local function buckets_first_instant(bucket, offset, p)
  local q, r = mul_divmod(bucket, p.window, p.precision)
  return q + ceil_div(r + offset, p.precision)
end

-- floor(count x inside / W): the part of the oldest bucket's count still inside the rolling window.
local function buckets_weigh(count, inside, p)
  if count == 0 then return 0 end
  if p.wide then return (mul_divmod(count, inside, p.window)) end
  return floor_div(count * inside, p.window)
end

-- When the estimate has decayed to 0: the newest bucket with a count weighs nothing N buckets later
-- once count x (W - offset) < W.
local function buckets_reset(now, bucket, counts, p)
  local window, precision = p.window, p.precision
  for position = 0, precision do
    local count = counts[position + 1]
    if count > 0 then
      local reset = buckets_first_instant(bucket - position + precision, window - floor_div(window - 1, count), p)
      if reset > now then return reset end
      return now
    end
  end
  return now
end

-- The first instant at which floor(estimate) + cost <= capacity, bucket by bucket from the current one.
local function buckets_retry(bucket, p, cost, whole, counts)
  local window, capacity, precision = p.window, p.capacity, p.precision
  local in_window = whole
  for later = 0, precision do
    local weighted = counts[precision - later + 1]
    if later > 0 then in_window = in_window - weighted end
    local room = capacity - cost - in_window
    if room >= 0 then
      -- The least offset at which floor(weighted x (W - offset) / W) <= room (see sliding-window.lua).
      local least = 0
      if weighted > room then
        if p.wide then
          least = window - floor_of_product_less_one(room + 1, window, weighted)
        else
          least = window - floor_div((room + 1) * window - 1, weighted)
        end
      end
      if least < window then
        local instant = buckets_first_instant(bucket + later, least, p)
        if instant < buckets_first_instant(bucket + later + 1, 0, p) then return instant end
      end
    end
  end
  return buckets_first_instant(bucket + precision + 1, 0, p)
end

local function decide_sliding_buckets(stored_index, stored_counts, now, cost, p)
  local window, capacity, precision = p.window, p.capacity, p.precision
  local bucket, offset = mul_divmod(now, precision, window)
  -- The window slid this many buckets since the state was written (nothing stored: all of them).
  local slid = precision + 1
  if stored_index then
    -- The clock went back: keep counting in the later bucket, as if at its very start.
    if stored_index > bucket then bucket, offset = stored_index, 0 end
    slid = bucket - stored_index
  end
  local counts = {}
  local whole = 0
  for position = 0, precision do
    local count = 0
    if position >= slid then count = stored_counts[position - slid + 1] end
    counts[position + 1] = count
    if position < precision then whole = whole + count end
  end
  local estimate = whole + buckets_weigh(counts[precision + 1], window - offset, p)
  if cost > capacity then
    return false, capacity - estimate, buckets_reset(now, bucket, counts, p), window, -1, REASON_COST_EXCEEDS_CAPACITY
  end
  if estimate + cost > capacity then
    return false, capacity - estimate, buckets_reset(now, bucket, counts, p), buckets_retry(bucket, p, cost, whole, counts) - now, -1, REASON_NONE
  end
  counts[1] = counts[1] + cost
  local last = precision + 1
  while counts[last] == 0 do last = last - 1 end
  local fields = { format('%d', bucket) }
  for i = 1, last do fields[i + 1] = format('%d', counts[i]) end
  return true, capacity - estimate - cost, buckets_reset(now, bucket, counts, p), 0, -1, REASON_NONE, table.concat(fields, ' ')
end
