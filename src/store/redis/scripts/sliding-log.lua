--[[
  sliding-log.lua: the exact rolling window. The key is a LIST of entries "time cumulative weight",
  oldest first: cumulative is the running total of cost logged up to and including the entry, so
  the total in the window is cumulative(newest) - (cumulative(oldest) - weight(oldest)). Entries at
  or before now - window no longer count. Requests in the same ms share an entry; with
  count_rejected, an attempt that finds `capacity` entries drops the oldest, which never changes a
  decision (docs/semantics.md). The list holds at most `capacity` entries.

  The list is read at its ends, never whole (docs/algorithms.md "Sliding log"): its oldest and
  newest entries give the total; expired entries at the head are found by a galloping search
  (amortised O(1) when a write then trims them) and the entry whose expiry frees enough on a
  denial by bisection over the cumulative totals (the oldest entry first: with unit costs it is
  the answer). Each read is one LINDEX (LLEN only when a search needs positions); an entry read
  twice in a call is read once.

  decide_sliding_log(key, now, cost, p) -> the values of level.lua, whose write, when set, is
  { expired = entries to drop from the head, merge = true|false, entry = "t c w" }, or
  { expired = n, trim_only = true } for a consume that logs nothing but finds n expired entries;
  write_sliding_log(key, write, ttl) stores it.
]]
-- The log being decided: its key, its length (read when first needed), the entries read so far
-- by 0-based position, its newest entry, and whether an entry was not "t c w".
local log_key, log_length, log_seen, log_newest, log_corrupt

-- An entry as { time, cumulative, weight }; an unreadable one marks the log corrupt.
local function parse_entry(text)
  local ok, t, c, w = parse_state(text or '', 3)
  if not ok then
    log_corrupt = true
    return { 0, 0, 0 }
  end
  return { t, c, w }
end

-- The number of entries (LLEN, once: the common calls never need it).
local function log_size()
  if log_length == nil then
    log_length = call('LLEN', log_key)
    if log_length > 0 then log_seen[log_length - 1] = log_newest end
  end
  return log_length
end

-- The entry at 0-based `index`. LINDEX walks the list's nodes from the end it is given, so the
-- back half is named from the tail.
local function at(index)
  local entry = log_seen[index]
  if entry then return entry end
  local n = log_size()
  local from = index
  if index + index >= n then from = index - n end
  entry = parse_entry(call('LINDEX', log_key, from))
  log_seen[index] = entry
  return entry
end

-- How many entries at the head of the log (oldest at 0) are at or before `cutoff`: a galloping
-- search from the head, then bisection; O(log m) reads for m expired entries.
local function count_expired(cutoff)
  if at(0)[1] > cutoff then return 0 end
  local n = log_size()
  if log_newest[1] <= cutoff then return n end
  local low, step = 0, 1 -- at(low) is expired, the newest is not
  local high = 1
  while high < n - 1 and at(high)[1] <= cutoff do
    low, step = high, step * 2
    high = low + step
  end
  if high > n - 1 then high = n - 1 end
  while high - low > 1 do
    local mid = floor((low + high) / 2)
    if at(mid)[1] <= cutoff then low = mid else high = mid end
  end
  return high
end

-- The decision on the log (log_key ... set by decide_sliding_log).
local function decide_log(now, cost, p)
  local expired = 0
  if log_newest then expired = count_expired(now - p.window) end
  local first = expired
  -- Entries still counting: none when the log is empty or all expired (count_expired read its length).
  local any = log_newest ~= nil and expired ~= log_length
  local expired_total = 0
  local newest = nil
  if any then
    local oldest = at(first)
    expired_total = oldest[2] - oldest[3]
    newest = log_newest
  end
  local total = 0
  if newest then total = newest[2] - expired_total end
  local reset_at = now
  if newest then reset_at = newest[1] + p.window end

  -- A consume that logs nothing still drops the expired entries, as the memory store does (so a
  -- later call with an earlier `now` finds the same log in both; decide.lua's record).
  local write = nil
  if expired > 0 then write = { expired = expired, trim_only = true } end
  if cost > p.capacity then
    return false, p.capacity - total, reset_at, p.window, -1, REASON_COST_EXCEEDS_CAPACITY, write
  end
  local allowed = total + cost <= p.capacity
  -- The newest entry after the write, and whether it is a new one (at position n) or the newest merged.
  local last, appended = newest, false
  if allowed or p.count_rejected then
    local time = now
    if newest and newest[1] > now then time = newest[1] end
    if newest and newest[1] == time then
      last = { time, newest[2] + cost, newest[3] + cost }
      write = { expired = expired, merge = true }
    else
      -- Admitted, the log holds fewer than capacity entries (each weighs >= 1 and the total
      -- leaves room); a denied attempt logged into a full log drops the oldest: the newest
      -- capacity - 1 entries and this one already hold >= capacity, so the oldest can never
      -- decide anything again (it expires before they do).
      if not allowed and any and log_size() - expired >= p.capacity then
        expired_total = at(first)[2]
        first = first + 1
        expired = expired + 1
      end
      local previous_total = expired_total
      if newest then previous_total = newest[2] end
      last, appended = { time, previous_total + cost, cost }, true
      write = { expired = expired, merge = false }
    end
    write.entry = format('%d %d %d', last[1], last[2], last[3])
    total = last[2] - expired_total
    reset_at = last[1] + p.window
  end
  if allowed then
    return true, p.capacity - total, reset_at, 0, -1, REASON_NONE, write
  end
  -- The oldest entry whose expiry brings the total down to capacity - cost: the oldest itself
  -- when its cumulative reaches the goal (unit costs; a merge keeps its time), else bisection
  -- over the entries from `first` to the newest (after the write).
  local goal = expired_total + total - (p.capacity - cost)
  if any and (log_length == nil or first < log_length) and at(first)[2] >= goal then
    return false, p.capacity - total, reset_at, at(first)[1] + p.window - now, -1, REASON_NONE, write
  end
  local n = log_size()
  local last_index = n - 1
  if appended then last_index = n end
  local function entry(index)
    if index == last_index then return last end
    return at(index)
  end
  local low, high = first, last_index
  while low < high do
    local mid = floor((low + high) / 2)
    if entry(mid)[2] >= goal then high = mid else low = mid + 1 end
  end
  return false, p.capacity - total, reset_at, entry(low)[1] + p.window - now, -1, REASON_NONE, write
end

local function decide_sliding_log(key, now, cost, p)
  local oldest = pcall_redis('LINDEX', key, 0)
  if type(oldest) == 'table' then return false, 0, now, 0, -1, REASON_WRONG_TYPE end
  log_key, log_length, log_seen, log_newest, log_corrupt = key, nil, {}, nil, false
  if oldest then
    log_seen[0] = parse_entry(oldest)
    log_newest = parse_entry(call('LINDEX', key, -1))
  else
    log_length = 0
  end
  local allowed, remaining, reset_at, retry_after, delay, reason, write = decide_log(now, cost, p)
  if log_corrupt then return false, 0, now, 0, -1, REASON_CORRUPT_STATE end
  return allowed, remaining, reset_at, retry_after, delay, reason, write
end

-- Stores decide_sliding_log's `write`: the log then lives `ttl` ms (a trim alone keeps its expiry).
local function write_sliding_log(key, write, ttl)
  if write.expired > 0 then call('LTRIM', key, write.expired, -1) end
  if write.trim_only then return end
  if write.merge then
    call('LSET', key, -1, write.entry)
  else
    call('RPUSH', key, write.entry)
  end
  call('PEXPIRE', key, ttl)
end
