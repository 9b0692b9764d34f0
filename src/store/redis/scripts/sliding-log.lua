--[[
  sliding-log.lua: the exact rolling window. The key is a LIST of entries "time cumulative weight",
  oldest first: cumulative is the running total of cost logged up to and including the entry, so
  the total in the window is cumulative(newest) - (cumulative(oldest) - weight(oldest)). Entries at
  or before now - window no longer count. Requests in the same ms share an entry; with
  count_rejected, an attempt that finds `capacity` entries drops the oldest, which never changes a
  decision (docs/semantics.md). The list holds at most `capacity` entries; each call reads
  it whole, so this algorithm suits small limits (logins, OTPs), as it is meant to.

  decide_sliding_log(entries, now, cost, p) -> the values of level.lua, whose write, when set, is
  { expired = entries to drop from the head, merge = true|false, entry = "t c w" }.
]]
local function decide_sliding_log(entries, now, cost, p)
  local cutoff = now - p.window
  local first = 1
  while first <= #entries and entries[first][1] <= cutoff do first = first + 1 end
  local expired = first - 1
  local size = #entries - expired
  local expired_total = 0
  local newest = nil
  if size > 0 then
    expired_total = entries[first][2] - entries[first][3]
    newest = entries[#entries]
  end
  local total = 0
  if newest then total = newest[2] - expired_total end
  local reset_at = now
  if newest then reset_at = newest[1] + p.window end

  if cost > p.capacity then
    return false, p.capacity - total, reset_at, p.window, -1, REASON_COST_EXCEEDS_CAPACITY
  end
  local allowed = total + cost <= p.capacity
  local write = nil
  if allowed or p.count_rejected then
    local time = now
    if newest and newest[1] > now then time = newest[1] end
    local entry
    if newest and newest[1] == time then
      entry = { time, newest[2] + cost, newest[3] + cost }
      entries[#entries] = entry
      write = { expired = expired, merge = true }
    else
      if size >= p.capacity then
        -- Full: the newest capacity - 1 entries and this one already hold >= capacity, so the
        -- oldest can never decide anything again (it expires before they do). Drop it.
        expired_total = entries[first][2]
        first = first + 1
        expired = expired + 1
        size = size - 1
      end
      local previous_total = expired_total
      if newest then previous_total = newest[2] end
      entry = { time, previous_total + cost, cost }
      entries[#entries + 1] = entry
      size = size + 1
      write = { expired = expired, merge = false }
    end
    write.entry = format('%d %d %d', entry[1], entry[2], entry[3])
    newest = entry
    total = newest[2] - expired_total
    reset_at = newest[1] + p.window
  end
  if allowed then
    return true, p.capacity - total, reset_at, 0, -1, REASON_NONE, write
  end
  -- The oldest entry whose expiry brings the total down to capacity - cost (binary search).
  local goal = expired_total + total - (p.capacity - cost)
  local low, high = first, #entries
  while low < high do
    local mid = floor((low + high) / 2)
    if entries[mid][2] >= goal then high = mid else low = mid + 1 end
  end
  return false, p.capacity - total, reset_at, entries[low][1] + p.window - now, -1, REASON_NONE, write
end
