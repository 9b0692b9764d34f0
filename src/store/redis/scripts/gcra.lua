--[[
  gcra.lua: generic cell rate algorithm, one theoretical arrival time (TAT) per key.
  Emission interval T = window / limit is usually fractional, so TAT is held exactly as whole ms
  plus a remainder in 1/limit ms. The state is (remainder, end), end = ceil(TAT) (layout.lua): TAT
  is end - 1 + remainder / limit, or end itself when the remainder is 0.
  Same decisions as the token bucket for a given policy (docs/semantics.md).
]]
local function decide_gcra(stored_remainder, stored_end, now, cost, p)
  local window, limit, capacity = p.window, p.limit, p.capacity
  local tat_ms, remainder = tat_whole_ms(stored_remainder, stored_end)
  -- How far TAT is ahead of now, in 1/limit ms (one request = window of these).
  local ahead = 0
  if stored_remainder then
    ahead = (tat_ms - now) * limit + remainder
    if ahead < 0 then ahead = 0 end
  end
  local tolerance = capacity * window
  -- Wide policies, and a backlog beyond the capacity (left by a wide policy or a lower limit).
  if p.wide or ahead > tolerance then return decide_wide_level(tat_ms, remainder, now, cost, p, false) end
  if cost > capacity then
    return false, level_whole_requests(tolerance, ahead, window), now + ceil_div(ahead, limit), window, -1, REASON_COST_EXCEEDS_CAPACITY
  end
  local increment = cost * window
  if ahead + increment > tolerance then
    return false, level_whole_requests(tolerance, ahead, window), now + ceil_div(ahead, limit),
      ceil_div(ahead + increment - tolerance, limit), -1, REASON_NONE
  end
  local next_ahead = ahead + increment
  -- The new TAT is now + next_ahead / limit: its remainder is written, its end is reset_at.
  return true, level_whole_requests(tolerance, next_ahead, window), now + ceil_div(next_ahead, limit), 0, -1, REASON_NONE,
    next_ahead - floor_div(next_ahead, limit) * limit
end
