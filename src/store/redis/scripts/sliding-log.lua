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
  the answer). Each read is one LINDEX; an entry read twice in a call is read once.

  decide_sliding_log(key, now, cost, p) -> the values of level.lua, whose write, when set, is
  { expired = entries to drop from the head, merge = true|false, entry = "t c w" }, or
  { expired = n, trim_only = true } for a consume that logs nothing but finds n expired entries.
]]
-- Raised (and caught below) when an entry is not "t c w".
local CORRUPT_LOG = {}

-- The entry at 0-based `index` of `key`'s `n` as { time, cumulative, weight }, cached in `seen`.
-- LINDEX walks the list's nodes from the end it is given, so the back half is named from the tail.
local function log_entry(key, n, seen, index)
  local entry = seen[index]
  if entry then return entry end
  local from = index
  if index + index >= n then from = index - n end
  local ok, t, c, w = parse_state(call('LINDEX', key, from) or '', 3)
  if not ok then error(CORRUPT_LOG) end
  entry = { t, c, w }
  seen[index] = entry
  return entry
end

-- How many entries at the head of a log of `n` (oldest at 0) are at or before `cutoff`: a
-- galloping search from the head, then bisection; O(log m) reads for m expired entries.
local function count_expired(at, n, cutoff)
  if n == 0 or at(0)[1] > cutoff then return 0 end
  if at(n - 1)[1] <= cutoff then return n end
  local low, step = 0, 1 -- at(low) is expired, at(n - 1) is not
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

-- The decision on a log of `n` entries read through `at`.
local function decide_log(at, n, now, cost, p)
  local expired = count_expired(at, n, now - p.window)
  local first = expired
  local size = n - expired
  local expired_total = 0
  local newest = nil
  if size > 0 then
    local oldest = at(first)
    expired_total = oldest[2] - oldest[3]
    newest = at(n - 1)
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
  -- The newest entry after the write, and its position (n - 1 when merged, n when appended).
  local last, last_index = newest, n - 1
  if allowed or p.count_rejected then
    local time = now
    if newest and newest[1] > now then time = newest[1] end
    if newest and newest[1] == time then
      last = { time, newest[2] + cost, newest[3] + cost }
      write = { expired = expired, merge = true }
    else
      if size >= p.capacity then
        -- Full: the newest capacity - 1 entries and this one already hold >= capacity, so the
        -- oldest can never decide anything again (it expires before they do). Drop it.
        expired_total = at(first)[2]
        first = first + 1
        expired = expired + 1
      end
      local previous_total = expired_total
      if newest then previous_total = newest[2] end
      last, last_index = { time, previous_total + cost, cost }, n
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
  -- when its cumulative reaches the goal (unit costs), else bisection over [first, last_index].
  local function entry(index)
    if index == last_index then return last end
    return at(index)
  end
  local goal = expired_total + total - (p.capacity - cost)
  local low, high = first, last_index
  if entry(low)[2] < goal then
    low = low + 1
    while low < high do
      local mid = floor((low + high) / 2)
      if entry(mid)[2] >= goal then high = mid else low = mid + 1 end
    end
  end
  return false, p.capacity - total, reset_at, entry(low)[1] + p.window - now, -1, REASON_NONE, write
end

local function decide_sliding_log(key, now, cost, p)
  local length = pcall_redis('LLEN', key)
  if type(length) == 'table' then return false, 0, now, 0, -1, REASON_WRONG_TYPE end
  local seen = {}
  local r = { pcall(decide_log, function(index) return log_entry(key, length, seen, index) end, length, now, cost, p) }
  if not r[1] then
    if r[2] == CORRUPT_LOG then return false, 0, now, 0, -1, REASON_CORRUPT_STATE end
    error(r[2])
  end
  return r[2], r[3], r[4], r[5], r[6], r[7], r[8]
end
