--[[
  prelude.lua: helpers shared by every algorithm script. Tollgate composes the scripts it sends
  to Redis as prelude + layout.lua (the stored state) + the algorithm files + a driver (decide.lua
  for a batch, single.lua for a lone decision), in that order (scripts.ts); each algorithm file
  defines one function, the driver binds KEYS/ARGV and calls them.

  Every number here is an integer below 2^53 (the limiter refuses policies whose arithmetic could
  exceed it; wide policies multiply with mul_divmod), so doubles are exact; state is written with
  %d, never with tostring (which would print 1.7e+15 and lose digits).
]]

local floor = math.floor
local tonumber = tonumber
local format = string.format
local find = string.find
local sub = string.sub
local call = redis.call
local pcall_redis = redis.pcall

-- Exact floor(a / b) for integers a >= 0, b > 0 (a correctly rounded a / b can round up to an integer).
local function floor_div(a, b)
  local q = floor(a / b)
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

-- Exact (floor(a * b / m), a * b mod m) for integers a, b >= 0, 1 <= m < 2^52 whose quotient is below
-- 2^53, even when a * b is not (src/algorithms/integer.ts mulDivmod, the same steps): a is reduced
-- mod m and b fed in base-2^k digits with m * 2^k <= 2^53, so every intermediate stays exact.
local function mul_divmod(a, b, m)
  local product = a * b
  if product <= 9007199254740991 then
    local q = floor_div(product, m)
    return q, product - q * m
  end
  local high = floor_div(a, m)
  local low = a - high * m
  local k = 53 - math.ceil(math.log(m + 1) / math.log(2))
  while m * 2 ^ k > 9007199254740992 do k = k - 1 end
  while m * 2 ^ (k + 1) <= 9007199254740992 do k = k + 1 end
  local base = 2 ^ k
  local place = 1
  while place * base <= b do place = place * base end
  local q, r, rest = 0, 0, b
  while place >= 1 do
    local digit = floor(rest / place)
    rest = rest - digit * place
    local shifted = r * base
    local shifted_q = floor_div(shifted, m)
    local added = low * digit
    local added_q = floor_div(added, m)
    q = q * base + shifted_q + added_q
    r = shifted - shifted_q * m + (added - added_q * m)
    if r >= m then
      r = r - m
      q = q + 1
    end
    place = place / base
  end
  return high * b + q, r
end

-- Reason codes returned to the client (see store/redis/protocol.ts).
local REASON_NONE = 0
local REASON_COST_EXCEEDS_CAPACITY = 1
local REASON_WRONG_TYPE = 10
local REASON_CORRUPT_STATE = 11
-- A calendar window: the script's clock is outside the periods [b0, b2) the caller sent.
local REASON_CLOCK_OUTSIDE_PERIODS = 12

-- An integer written by this script, or nil (a finite whole number below 2^53 in magnitude).
local function parse_integer(text)
  local value = tonumber(text)
  if value == nil or value ~= floor(value) or value > 9007199254740991 or value < -9007199254740991 then return nil end
  return value
end

-- Parses a state string of exactly `count` (2 or 3) integers separated by single spaces.
-- Returns true and the values, or false if the text is anything else. Multiple returns, no table:
-- this runs once per decision.
local function parse_state(text, count)
  local first_space = find(text, ' ', 1, true)
  if first_space == nil then return false end
  local a = parse_integer(sub(text, 1, first_space - 1))
  local b, c
  if count == 2 then
    b = parse_integer(sub(text, first_space + 1))
  else
    local second_space = find(text, ' ', first_space + 1, true)
    if second_space == nil then return false end
    b = parse_integer(sub(text, first_space + 1, second_space - 1))
    c = parse_integer(sub(text, second_space + 1))
    if c == nil then return false end
  end
  if a == nil or b == nil then return false end
  return true, a, b, c
end
