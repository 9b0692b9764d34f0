--[[
  fair-share.lua: fair shares of one capacity (docs/semantics.md "Fair shares"), one call per
  decision, atomic. Composed as prelude.lua + codes.lua + this driver (lua.ts FAIR_SHARE_SCRIPT);
  the same rule as src/algorithms/fair-share.ts, in the same integers, so both stores decide alike.

  KEYS[1]  the group's hash, under a hash tag of the group's own (one Cluster slot per group):
           field s = the window's start, t = its total, and per tenant 'k' .. key =
           "used window weight seen" (used counts in that window only)
  ARGV[1]  now: '' to use Redis TIME, else epoch ms (the key then lives longer in real time, as in decide.lua)
  ARGV[2]  window   ms, >= 1
  ARGV[3]  limit    the group's total per window, >= 1
  ARGV[4]  weight   the tenant's, >= 1
  ARGV[5]  cost     >= 0
  ARGV[6]  op       1 consume, 2 peek, 3 reset (forget the tenant)
  ARGV[7]  the tenant's key
  ARGV[8]  most active tenants of a group, >= 1

  Returns now, allowed, remaining, reset_at, retry_after, reason (0, 1 cost exceeds the limit,
  10 the key holds another type, 11 unreadable state: nothing was written).
]]
local function integer_arg(index, minimum)
  local value = tonumber(ARGV[index])
  if value == nil or value ~= floor(value) or value < minimum or value > MAX_INTEGER then return nil end
  return value
end
local function clock_ms()
  local time = call('TIME')
  return tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
end

-- decide.lua's MAX_REPLAY_LAG and REPLAY_SLACK (protocol.ts): this driver keeps its own copies.
local max_replay_lag, replay_slack = 3600000, 1000
local now
local extra_ttl = 0
if ARGV[1] == '' then
  now = clock_ms()
else
  now = integer_arg(1, 0)
  if now == nil then return redis.error_reply('ERR tollgate: argument 1 (now) is not valid') end
  local lag = clock_ms() - now
  if lag < 0 then lag = 0 end
  if lag > max_replay_lag then lag = max_replay_lag end
  extra_ttl = lag + replay_slack
end
local minimums = { [2] = 1, [3] = 1, [4] = 1, [5] = 0, [6] = 1, [8] = 1 }
for i, minimum in pairs(minimums) do
  if integer_arg(i, minimum) == nil or #KEYS ~= 1 or #ARGV ~= 8 or tonumber(ARGV[6]) > 3 then
    return redis.error_reply('ERR tollgate: argument ' .. i .. ' (fair share) is not valid: ' .. tostring(ARGV[i]))
  end
end
local window, limit, weight, cost, op, max_tenants = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[8])
local key, field = KEYS[1], 'k' .. ARGV[7]

local kind = call('TYPE', key)['ok']
if kind ~= 'none' and kind ~= 'hash' then return { now, 0, 0, now, 0, REASON_WRONG_TYPE } end
local flat = call('HGETALL', key)
local stored_start, stored_total = 0, 0
local others, own = {}, nil
for i = 1, #flat, 2 do
  local name, value = flat[i], flat[i + 1]
  if name == 's' then
    stored_start = tonumber(value)
  elseif name == 't' then
    stored_total = tonumber(value)
  else
    local u, w, wt, sn = string.match(value, '^(%d+) (%d+) (%d+) (%d+)$')
    if u == nil or sub(name, 1, 1) ~= 'k' then return { now, 0, 0, now, 0, REASON_CORRUPT_STATE } end
    local tenant = { name = name, used = tonumber(u), window = tonumber(w), weight = tonumber(wt), seen = tonumber(sn) }
    if name == field then own = tenant else others[#others + 1] = tenant end
  end
end
if stored_start == nil or stored_total == nil then return { now, 0, 0, now, 0, REASON_CORRUPT_STATE } end

if op == OP_RESET then
  if own ~= nil then
    call('HDEL', key, field)
    if own.window == stored_start then
      local left = stored_total - own.used
      if left < 0 then left = 0 end
      call('HSET', key, 't', format('%d', left))
    end
  end
  return { now, 1, 0, now, 0, REASON_NONE }
end

-- The window (a clock that went back keeps counting in the later one), its total, the active tenants.
local start = floor_div(now, window) * window
if stored_start > start then start = stored_start end
local total = 0
if stored_start == start then total = stored_total end
-- Idle: asked in neither this window nor the one before.
local idle_before = start - window
local sum, active, idle = weight, 0, {}
for _, tenant in ipairs(others) do
  if tenant.seen < idle_before then
    idle[#idle + 1] = tenant.name
  else
    sum = sum + tenant.weight
    active = active + 1
  end
end
local reserved = 0
for _, tenant in ipairs(others) do
  if tenant.seen >= idle_before then
    local unused = floor_div(limit * tenant.weight, sum)
    if tenant.window == start then unused = unused - tenant.used end
    if unused > 0 then reserved = reserved + unused end
  end
end
local used = 0
if own ~= nil and own.window == start then used = own.used end
local window_end = start + window

if own == nil and active >= max_tenants then
  -- A newcomer past the cap waits for a tenant to go idle, at a window's end at the earliest; nothing is recorded.
  if cost == 0 then return { now, 1, 0, window_end, 0, REASON_NONE } end
  return { now, 0, 0, window_end, window_end - now, REASON_NONE }
end

local free = limit - total
local room = floor_div(limit * weight, sum) - used
if free - reserved > room then room = free - reserved end
if free < room then room = free end
if room < 0 then room = 0 end
if cost > limit then
  local reset_at = now
  if total > 0 then reset_at = window_end end
  return { now, 0, room, reset_at, window, REASON_COST_EXCEEDS_CAPACITY }
end
local allowed = cost <= room
if op == OP_CONSUME then
  if #idle > 0 then call('HDEL', key, unpack(idle)) end
  local added = 0
  if allowed then added = cost end
  local seen = now
  if own ~= nil and own.seen > now then seen = own.seen end
  call('HSET', key, 's', format('%d', start), 't', format('%d', total + added), field, format('%d %d %d %d', used + added, start, weight, seen))
  -- Its window ends within a window of now, and its tenants go idle a window after they asked.
  call('PEXPIRE', key, 2 * window + extra_ttl)
end
if allowed then return { now, 1, room - cost, window_end, 0, REASON_NONE } end
-- Denied: within a window the total and every share only grow, so nothing changes before its end.
return { now, 0, room, window_end, window_end - now, REASON_NONE }
