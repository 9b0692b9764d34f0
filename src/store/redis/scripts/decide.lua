--[[
  decide.lua: the driver. Decides a batch of rate limit requests atomically, in one script call.
  Requests come in groups; a group is all-or-nothing (a multi-limit check): if any request in it
  is denied, no admitted request of the group records anything (a count_rejected log of a denied
  one still does). A single limit() is a group of one.

  KEYS[i]   the state key of the i-th request, in order
  ARGV[1]   now: '' to use Redis TIME (so nodes with skewed clocks agree), else epoch ms
  ARGV[2]   number of groups
  then per group: ARGV n (requests in the group), followed by n records of 8 fields:
    op              1 consume, 2 peek (record nothing), 3 reset (delete the key)
    algorithm       1 token-bucket, 2 leaky-bucket, 3 fixed-window, 4 sliding-log,
                    5 sliding-window, 6 gcra
    cost            integer >= 1
    window          ms, integer >= 1
    limit           integer >= 1 (limit 0 never reaches Redis but in a reset)
    capacity        what is admitted, soft allowance included
    nominal         the capacity `remaining` counts down from
    count_rejected  1 to log rejected attempts (sliding-log), else 0

  Returns 6 integers per request: allowed (1/0), remaining, reset_at, retry_after,
  delay (-1 unless leaky-bucket), reason (0 none, 1 cost exceeds capacity, 10 the key holds
  another type, 11 the key holds unreadable state). Bad arguments fail the whole call before
  anything is read or written.
]]
local MAX_INTEGER = 9007199254740991
local FIELDS = 8

local function integer_arg(index, minimum)
  local value = tonumber(ARGV[index])
  if value == nil or value ~= math.floor(value) or value < minimum or value > MAX_INTEGER then
    return nil
  end
  return value
end

local function bad_argument(index, what)
  return redis.error_reply('ERR tollgate: argument ' .. index .. ' (' .. what .. ') is not a valid integer: ' .. tostring(ARGV[index]))
end

-- 1. Validate every argument before touching any key.
local now
if ARGV[1] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
else
  now = integer_arg(1, 0)
  if now == nil then return bad_argument(1, 'now') end
end
local group_count = integer_arg(2, 1)
if group_count == nil then return bad_argument(2, 'group count') end

local groups = {}
local index = 3
local key_index = 1
for g = 1, group_count do
  local size = integer_arg(index, 1)
  if size == nil then return bad_argument(index, 'group size') end
  index = index + 1
  local group = {}
  for r = 1, size do
    local fields = {}
    for f = 1, FIELDS do
      local minimum = 0
      if f <= 4 then minimum = 1 end
      fields[f] = integer_arg(index + f - 1, minimum)
      if fields[f] == nil then return bad_argument(index + f - 1, 'request field ' .. f) end
    end
    if fields[1] > 3 or fields[2] > 6 or fields[8] > 1 then return bad_argument(index, 'op or algorithm') end
    -- A reset only needs the key; a decision needs a positive rate and capacity (no division by 0).
    if fields[1] ~= 3 and (fields[5] < 1 or fields[6] < 1 or fields[7] < 1) then
      return bad_argument(index + 4, 'limit, capacity and nominal capacity must be >= 1')
    end
    local key = KEYS[key_index]
    if key == nil then return redis.error_reply('ERR tollgate: fewer keys than requests') end
    group[r] = {
      key = key, op = fields[1], algorithm = fields[2], cost = fields[3],
      p = { window = fields[4], limit = fields[5], capacity = fields[6], nominal = fields[7],
            count_rejected = fields[8] == 1 },
    }
    index = index + FIELDS
    key_index = key_index + 1
  end
  groups[g] = group
end

-- 2. Decide each group, then record what it admitted.
local SLIDING_LOG = 4

local function read_state(request)
  if request.algorithm == SLIDING_LOG then
    local reply = redis.pcall('LRANGE', request.key, 0, -1)
    if type(reply) == 'table' and reply.err then return nil, REASON_WRONG_TYPE end
    local entries = {}
    for i = 1, #reply do
      local entry = parse_numbers(reply[i], 3)
      if entry == nil then return nil, REASON_CORRUPT_STATE end
      entries[i] = entry
    end
    return entries, REASON_NONE
  end
  local reply = redis.pcall('GET', request.key)
  if type(reply) == 'table' and reply.err then return nil, REASON_WRONG_TYPE end
  if not reply then return nil, REASON_NONE end
  local count = 2
  if request.algorithm == 5 then count = 3 end
  local state = parse_numbers(reply, count)
  if state == nil then return nil, REASON_CORRUPT_STATE end
  return state, REASON_NONE
end

local function decide(request, state)
  local a = request.algorithm
  if a == 1 then return decide_level(state, now, request.cost, request.p, false) end
  if a == 2 then return decide_level(state, now, request.cost, request.p, true) end
  if a == 3 then return decide_fixed_window(state, now, request.cost, request.p) end
  if a == SLIDING_LOG then return decide_sliding_log(state, now, request.cost, request.p) end
  if a == 5 then return decide_sliding_window(state, now, request.cost, request.p) end
  return decide_gcra(state, now, request.cost, request.p)
end

local function record(request, result)
  local write = result[7]
  local ttl = result[3] - now
  if ttl < 1 then ttl = 1 end
  if request.algorithm ~= SLIDING_LOG then
    redis.call('SET', request.key, write, 'PX', ttl)
    return
  end
  if write.expired > 0 then redis.call('LTRIM', request.key, write.expired, -1) end
  if write.merge then
    redis.call('LSET', request.key, -1, write.entry)
  else
    redis.call('RPUSH', request.key, write.entry)
  end
  redis.call('PEXPIRE', request.key, ttl)
end

local out = {}
for g = 1, #groups do
  local group = groups[g]
  local results = {}
  local all_allowed = true
  for r = 1, #group do
    local request = group[r]
    local result
    if request.op == 3 then
      redis.call('DEL', request.key)
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
    if request.op == 1 and result[7] ~= nil and (all_allowed or not result[1]) then record(request, result) end
    local remaining = result[2] - (request.p.capacity - request.p.nominal)
    if remaining < 0 then remaining = 0 end
    local allowed = 0
    if result[1] then allowed = 1 end
    out[#out + 1] = allowed
    out[#out + 1] = remaining
    out[#out + 1] = result[3]
    out[#out + 1] = result[4]
    out[#out + 1] = result[5]
    out[#out + 1] = result[6]
  end
end
return out
