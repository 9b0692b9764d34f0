--[[
  prelude.lua: helpers shared by every algorithm script. Tollgate composes the scripts it sends
  to Redis as prelude + the six algorithm files + decide.lua (the driver), in that order; each
  algorithm file defines one function, decide.lua binds KEYS/ARGV and calls them.

  Every number here is an integer below 2^53 (the limiter refuses policies whose arithmetic could
  exceed it), so doubles are exact; state is written with %d, never with tostring (which would
  print 1.7e+15 and lose digits).
]]

-- Exact floor(a / b) for integers a >= 0, b > 0 (a correctly rounded a / b can round up to an integer).
local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- Exact ceil(a / b) for integers a >= 0, b > 0.
local function ceil_div(a, b)
  local q = floor_div(a, b)
  if q * b == a then return q end
  return q + 1
end

-- Reason codes returned to the client (see store/redis/protocol.ts).
local REASON_NONE = 0
local REASON_COST_EXCEEDS_CAPACITY = 1
local REASON_WRONG_TYPE = 10
local REASON_CORRUPT_STATE = 11

-- Parses a state string of `count` space-separated integers; nil if it is not exactly that.
local function parse_numbers(text, count)
  local values = {}
  for token in string.gmatch(text, '%S+') do
    local value = tonumber(token)
    if value == nil or value ~= value or value == math.huge or value == -math.huge then return nil end
    values[#values + 1] = value
  end
  if #values ~= count then return nil end
  return values
end
