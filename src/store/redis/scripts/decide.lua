--[[
  decide.lua: the driver. Decides a batch of rate limit requests atomically, in one script call.
  Requests come in groups; a group is all-or-nothing (a multi-limit check): if any request in it
  is denied, no admitted request of the group records anything (a count_rejected log of a denied
  one still does). A single limit() is a group of one.

  KEYS[i]   the state key of the i-th request, in order
  ARGV[1]   now: '' to use Redis TIME (so nodes with skewed clocks agree), else epoch ms
  ARGV[2]   P, the number of distinct policies in the batch, then P records of 6 fields:
    algorithm       1 token-bucket, 2 leaky-bucket, 3 fixed-window, 4 sliding-log,
                    5 sliding-window, 6 gcra
    window          ms, integer >= 1
    limit           integer >= 0 (a limit of 0 is only ever sent for a reset)
    capacity        what is admitted, soft allowance included
    nominal         the capacity `remaining` counts down from
    count_rejected  1 to log rejected attempts (sliding-log), else 0
  then G, the number of groups, then per group: n (requests in the group) and n records of 3:
    policy          index into the policy records, from 1
    op              1 consume, 2 peek (record nothing), 3 reset (delete the key)
    cost            integer >= 1

  Returns 6 integers per request: allowed (1/0), remaining, reset_at, retry_after,
  delay (-1 unless leaky-bucket), reason (0 none, 1 cost exceeds capacity, 10 the key holds
  another type, 11 the key holds unreadable state). Bad arguments fail the whole call before
  anything is read or written.
]]
local SLIDING_LOG = 4
local SLIDING_WINDOW = 5
local OP_CONSUME, OP_RESET = 1, 3

local function integer_arg(index, minimum, maximum)
  local value = parse_integer(ARGV[index])
  if value == nil or value < minimum or (maximum and value > maximum) then return nil end
  return value
end

local function bad_argument(index, what)
  return redis.error_reply('ERR tollgate: argument ' .. index .. ' (' .. what .. ') is not valid: ' .. tostring(ARGV[index]))
end

local POLICY_FIELDS = { 'algorithm', 'window', 'limit', 'capacity', 'nominal', 'count_rejected' }
local POLICY_MINIMUMS = { 1, 1, 0, 0, 0, 0 }
local POLICY_MAXIMUMS = { 6, nil, nil, nil, nil, 1 }

-- 1. Validate every argument before touching any key.
local now
if ARGV[1] == '' then
  local time = call('TIME')
  now = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
else
  now = integer_arg(1, 0)
  if now == nil then return bad_argument(1, 'now') end
end

local policy_count = integer_arg(2, 1)
if policy_count == nil then return bad_argument(2, 'policy count') end
local policies = {}
local index = 3
for i = 1, policy_count do
  local v = {}
  for f = 1, 6 do
    v[f] = integer_arg(index + f - 1, POLICY_MINIMUMS[f], POLICY_MAXIMUMS[f])
    if v[f] == nil then return bad_argument(index + f - 1, 'policy ' .. i .. ' ' .. POLICY_FIELDS[f]) end
  end
  policies[i] = { algorithm = v[1], window = v[2], limit = v[3], capacity = v[4], nominal = v[5],
    count_rejected = v[6] == 1, usable = v[3] >= 1 and v[4] >= 1 and v[5] >= 1 }
  index = index + 6
end

local group_count = integer_arg(index, 1)
if group_count == nil then return bad_argument(index, 'group count') end
index = index + 1
-- Requests in flat arrays (no table per request: this runs once per decision).
local request_key, request_op, request_cost, request_policy = {}, {}, {}, {}
local group_last = {}
local count = 0
for g = 1, group_count do
  local size = integer_arg(index, 1)
  if size == nil then return bad_argument(index, 'group size') end
  index = index + 1
  for r = 1, size do
    local policy_index = integer_arg(index, 1, policy_count)
    if policy_index == nil then return bad_argument(index, 'policy index') end
    local op = integer_arg(index + 1, 1, 3)
    if op == nil then return bad_argument(index + 1, 'op') end
    local cost = integer_arg(index + 2, 1)
    if cost == nil then return bad_argument(index + 2, 'cost') end
    local p = policies[policy_index]
    -- A decision needs a positive rate and capacity (no division by 0); a reset only needs the key.
    if op ~= OP_RESET and not p.usable then
      return bad_argument(index, 'limit, capacity and nominal capacity must be >= 1 to decide')
    end
    count = count + 1
    local key = KEYS[count]
    if key == nil then return redis.error_reply('ERR tollgate: fewer keys than requests') end
    request_key[count], request_op[count], request_cost[count], request_policy[count] = key, op, cost, p
    index = index + 3
  end
  group_last[g] = count
end

-- 2. Decide each group, then record what it admitted.
local function read_log(key)
  local reply = pcall_redis('LRANGE', key, 0, -1)
  if reply.err then return nil, REASON_WRONG_TYPE end
  local entries = {}
  for i = 1, #reply do
    local ok, t, c, w = parse_state(reply[i], 3)
    if not ok then return nil, REASON_CORRUPT_STATE end
    entries[i] = { t, c, w }
  end
  return entries, REASON_NONE
end

-- Decides request i: the values of level.lua.
local function decide(i)
  local key, cost, p = request_key[i], request_cost[i], request_policy[i]
  local a = p.algorithm
  if a == SLIDING_LOG then
    local entries, problem = read_log(key)
    if entries == nil then return false, 0, now, 0, -1, problem end
    return decide_sliding_log(entries, now, cost, p)
  end
  local stored = pcall_redis('GET', key)
  local ok, s1, s2, s3 = false, nil, nil, nil
  if stored then
    if type(stored) == 'table' then return false, 0, now, 0, -1, REASON_WRONG_TYPE end
    local fields = 2
    if a == SLIDING_WINDOW then fields = 3 end
    ok, s1, s2, s3 = parse_state(stored, fields)
    if not ok then return false, 0, now, 0, -1, REASON_CORRUPT_STATE end
  end
  if a == 3 then return decide_fixed_window(s1, s2, now, cost, p) end
  if a == 6 then return decide_gcra(s1, s2, now, cost, p) end
  if a == 1 then return decide_level(s1, s2, now, cost, p, false) end
  if a == SLIDING_WINDOW then return decide_sliding_window(s1, s2, s3, now, cost, p) end
  return decide_level(s1, s2, now, cost, p, true)
end

local function record(key, p, write, reset_at)
  local ttl = reset_at - now
  if ttl < 1 then ttl = 1 end
  if p.algorithm ~= SLIDING_LOG then
    call('SET', key, write, 'PX', ttl)
    return
  end
  if write.expired > 0 then call('LTRIM', key, write.expired, -1) end
  if write.merge then
    call('LSET', key, -1, write.entry)
  else
    call('RPUSH', key, write.entry)
  end
  call('PEXPIRE', key, ttl)
end

local out = {}
local n = 0
local allowed, remaining, reset_at, retry_after, delay, reason, write = {}, {}, {}, {}, {}, {}, {}
local first = 1
for g = 1, group_count do
  local last = group_last[g]
  local all_allowed = true
  for i = first, last do
    if request_op[i] == OP_RESET then
      call('DEL', request_key[i])
      allowed[i], remaining[i], reset_at[i], retry_after[i], delay[i], reason[i], write[i] = true, 0, now, 0, -1, REASON_NONE, nil
    else
      allowed[i], remaining[i], reset_at[i], retry_after[i], delay[i], reason[i], write[i] = decide(i)
      if not allowed[i] then all_allowed = false end
    end
  end
  for i = first, last do
    local p = request_policy[i]
    if request_op[i] == OP_CONSUME and write[i] ~= nil and (all_allowed or not allowed[i]) then
      record(request_key[i], p, write[i], reset_at[i])
    end
    local shown = remaining[i] - (p.capacity - p.nominal)
    if shown < 0 then shown = 0 end
    if allowed[i] then out[n + 1] = 1 else out[n + 1] = 0 end
    out[n + 2] = shown
    out[n + 3] = reset_at[i]
    out[n + 4] = retry_after[i]
    out[n + 5] = delay[i]
    out[n + 6] = reason[i]
    n = n + 6
  end
  first = last + 1
end
return out
