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
local groups = {}
local key_index = 1
for g = 1, group_count do
  local size = integer_arg(index, 1)
  if size == nil then return bad_argument(index, 'group size') end
  index = index + 1
  local group = {}
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
    local key = KEYS[key_index]
    if key == nil then return redis.error_reply('ERR tollgate: fewer keys than requests') end
    group[r] = { key = key, op = op, cost = cost, p = p }
    index = index + 3
    key_index = key_index + 1
  end
  groups[g] = group
end

-- 2. Decide each group, then record what it admitted.
local function read_state(request)
  if request.p.algorithm == SLIDING_LOG then
    local reply = pcall_redis('LRANGE', request.key, 0, -1)
    if reply.err then return nil, REASON_WRONG_TYPE end
    local entries = {}
    for i = 1, #reply do
      local entry = parse_numbers(reply[i], 3)
      if entry == nil then return nil, REASON_CORRUPT_STATE end
      entries[i] = entry
    end
    return entries, REASON_NONE
  end
  local reply = pcall_redis('GET', request.key)
  if not reply then return nil, REASON_NONE end
  if type(reply) == 'table' then return nil, REASON_WRONG_TYPE end
  local count = 2
  if request.p.algorithm == SLIDING_WINDOW then count = 3 end
  local state = parse_numbers(reply, count)
  if state == nil then return nil, REASON_CORRUPT_STATE end
  return state, REASON_NONE
end

local function decide(request, state)
  local p = request.p
  local a = p.algorithm
  if a == 3 then return decide_fixed_window(state, now, request.cost, p) end
  if a == 6 then return decide_gcra(state, now, request.cost, p) end
  if a == 1 then return decide_level(state, now, request.cost, p, false) end
  if a == SLIDING_WINDOW then return decide_sliding_window(state, now, request.cost, p) end
  if a == 2 then return decide_level(state, now, request.cost, p, true) end
  return decide_sliding_log(state, now, request.cost, p)
end

local function record(request, result)
  local write = result[7]
  local ttl = result[3] - now
  if ttl < 1 then ttl = 1 end
  if request.p.algorithm ~= SLIDING_LOG then
    call('SET', request.key, write, 'PX', ttl)
    return
  end
  if write.expired > 0 then call('LTRIM', request.key, write.expired, -1) end
  if write.merge then
    call('LSET', request.key, -1, write.entry)
  else
    call('RPUSH', request.key, write.entry)
  end
  call('PEXPIRE', request.key, ttl)
end

local out = {}
local n = 0
for g = 1, group_count do
  local group = groups[g]
  local results = {}
  local all_allowed = true
  for r = 1, #group do
    local request = group[r]
    local result
    if request.op == OP_RESET then
      call('DEL', request.key)
      result = { true, 0, now, 0, -1, REASON_NONE }
    else
      local state, problem = read_state(request)
      if problem ~= REASON_NONE then
        result = { false, 0, now, 0, -1, problem }
      else
        result = decide(request, state)
      end
      if not result[1] then all_allowed = false end
    end
    results[r] = result
  end
  for r = 1, #group do
    local request, result = group[r], results[r]
    if request.op == OP_CONSUME and result[7] ~= nil and (all_allowed or not result[1]) then record(request, result) end
    local remaining = result[2] - (request.p.capacity - request.p.nominal)
    if remaining < 0 then remaining = 0 end
    if result[1] then out[n + 1] = 1 else out[n + 1] = 0 end
    out[n + 2] = remaining
    out[n + 3] = result[3]
    out[n + 4] = result[4]
    out[n + 5] = result[5]
    out[n + 6] = result[6]
    n = n + 6
  end
end
return out
