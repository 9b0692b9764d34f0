--[[
  gcra.lua: generic cell rate algorithm, one theoretical arrival time (TAT) per key.
  Emission interval T = window / limit is usually fractional, so TAT is held exactly as whole ms
  plus a remainder in 1/limit ms. State (string "tat_ms remainder").
  Same decisions as the token bucket for a given policy (docs/semantics.md).
]]
local function decide_gcra(state, now, cost, p)
  local tat_ms, remainder = 0, 0
  if state then
    tat_ms, remainder = state[1], state[2]
  end
  -- How far TAT is ahead of now, in 1/limit ms (one request = window of these).
  local ahead = (tat_ms - now) * p.limit + remainder
  if ahead < 0 then ahead = 0 end
  local tolerance = p.capacity * p.window
  local function whole_requests(at_ahead)
    if tolerance > at_ahead then return floor_div(tolerance - at_ahead, p.window) end
    return 0
  end
  if cost > p.capacity then
    return { false, whole_requests(ahead), now + ceil_div(ahead, p.limit), p.window, -1, REASON_COST_EXCEEDS_CAPACITY }
  end
  local increment = cost * p.window
  if ahead + increment > tolerance then
    return { false, whole_requests(ahead), now + ceil_div(ahead, p.limit), ceil_div(ahead + increment - tolerance, p.limit), -1, REASON_NONE }
  end
  local next_ahead = ahead + increment
  local whole_ms = floor_div(next_ahead, p.limit)
  return { true, whole_requests(next_ahead), now + ceil_div(next_ahead, p.limit), 0, -1, REASON_NONE,
    format('%d %d', now + whole_ms, next_ahead - whole_ms * p.limit) }
end
