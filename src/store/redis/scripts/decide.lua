--[[
  decide.lua: the driver. Decides a batch of rate limit requests atomically, in one script call.
  Requests come in groups; a group is all-or-nothing (a multi-limit check): if any request in it
  is denied, no admitted request of the group records anything (a count_rejected log of a denied
  one still does). A single limit() is a group of one.

  KEYS[i]   the state key of the i-th request, in order
  ARGV[1]   now: '' to use Redis TIME (so nodes with skewed clocks agree), else epoch ms (keys
            then live longer in real time, see below)
  ARGV[2]   P, the number of distinct policies in the batch, then P records of 9 fields:
    algorithm       1 token-bucket, 2 leaky-bucket, 3 fixed-window, 4 sliding-log,
                    5 sliding-window, 6 gcra
    window          ms, integer >= 1
    limit           integer >= 0 (a limit of 0 is only ever sent for a reset)
    capacity        what is admitted, soft allowance included
    nominal         the capacity `remaining` counts down from
    count_rejected  1 to log rejected attempts (sliding-log), else 0
    first_hit       1 for windows that start at a key's first hit (fixed-window), 2 for a calendar
                    window (fixed-window), else 0
    precision       buckets per window (sliding-window: 1..100, at most window; else 1)
    block           penalty ms after a denial (penalty.lua), 0 for none
    and, only after a calendar window's record (first_hit 2), 3 more: b0 < b1 < b2, consecutive
    period boundaries (epoch ms) around the caller's clock; the period is the one holding `now`
    (fixed-window.lua), and a `now` outside [b0, b2) is answered with reason 12, deciding nothing
  then G, the number of groups, then per group: n (requests in the group) and n records of 3:
    policy          index into the policy records, from 1
    op              1 consume, 2 peek (record nothing), 3 reset (delete the key), 4 add (local-first
                    sync: fixed-window and sliding-window of precision 1 only, a group of its own)
    cost            integer >= 1 (>= 0 for a peek: 0 reports the quota as it stands; >= 0 for an
                    add: 0 only reads the counts)

  Returns now (the decision time, epoch ms: every relative figure the caller derives starts from
  it), then 6 integers per request: allowed (1/0), remaining, reset_at, retry_after,
  delay (-1 unless leaky-bucket), reason (0 none, 1 cost exceeds capacity, 2 blocked, 3 blocked:
  this denial started the block, 10 the key holds another type, 11 the key holds unreadable
  state). An add answers its counts instead: 1, the
  current window's count, its mark (index; a first-hit window's start), the previous window's
  count (sliding-window; else 0), -1, reason. Bad arguments fail the whole call before
  anything is read or written.
]]
-- The algorithm and op codes and MAX_INTEGER are in codes.lua.

-- ARGV[index] as an integer in [minimum, maximum or 2^53 - 1], else nil (NaN fails every test).
local function integer_arg(index, minimum, maximum)
  local value = tonumber(ARGV[index])
  if value == nil or value ~= floor(value) or value < minimum or value > (maximum or MAX_INTEGER) then return nil end
  return value
end

local function bad_argument(index, what)
  return redis.error_reply('ERR tollgate: argument ' .. index .. ' (' .. what .. ') is not valid: ' .. tostring(ARGV[index]))
end

-- 1. Validate every argument before touching any key.
local now
-- Keys live in real time, but an explicit `now` (tests, replays, a caller's clock) may run ahead
-- of it or behind it: such a key is kept (its lifetime in that time) + (how far `now` lags real
-- time, at most MAX_REPLAY_LAG) + REPLAY_SLACK of real time, so a replay gets the same answers as
-- the memory store however slowly it runs within those bounds (docs/semantics.md).
local MAX_REPLAY_LAG = 3600000
local REPLAY_SLACK = 1000
local extra_ttl = 0
local function clock_ms()
  local time = call('TIME')
  return tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
end
if ARGV[1] == '' then
  now = clock_ms()
else
  now = integer_arg(1, 0)
  if now == nil then return bad_argument(1, 'now') end
  local lag = clock_ms() - now
  if lag < 0 then lag = 0 end
  if lag > MAX_REPLAY_LAG then lag = MAX_REPLAY_LAG end
  extra_ttl = lag + REPLAY_SLACK
end

local policy_count = integer_arg(2, 1)
if policy_count == nil then return bad_argument(2, 'policy count') end
local policies = {}
local index = 3
for i = 1, policy_count do
  local algorithm = integer_arg(index, TOKEN_BUCKET, GCRA)
  if algorithm == nil then return bad_argument(index, 'policy ' .. i .. ' algorithm') end
  local window = integer_arg(index + 1, 1)
  if window == nil then return bad_argument(index + 1, 'policy ' .. i .. ' window') end
  local limit = integer_arg(index + 2, 0)
  if limit == nil then return bad_argument(index + 2, 'policy ' .. i .. ' limit') end
  local capacity = integer_arg(index + 3, 0)
  if capacity == nil then return bad_argument(index + 3, 'policy ' .. i .. ' capacity') end
  local nominal = integer_arg(index + 4, 0)
  if nominal == nil then return bad_argument(index + 4, 'policy ' .. i .. ' nominal') end
  local count_rejected = integer_arg(index + 5, 0, 1)
  if count_rejected == nil then return bad_argument(index + 5, 'policy ' .. i .. ' count_rejected') end
  local first_hit = integer_arg(index + 6, 0, 2)
  if first_hit == nil or (first_hit == 2 and algorithm ~= FIXED_WINDOW) then return bad_argument(index + 6, 'policy ' .. i .. ' first_hit') end
  local calendar = nil
  if first_hit == 2 then
    calendar = { integer_arg(index + 9, 0), integer_arg(index + 10, 0), integer_arg(index + 11, 0) }
    if calendar[1] == nil or calendar[2] == nil or calendar[3] == nil or calendar[1] >= calendar[2] or calendar[2] >= calendar[3] then
      return bad_argument(index + 9, 'policy ' .. i .. ' calendar boundaries b0 < b1 < b2')
    end
  end
  local precision = integer_arg(index + 7, 1, 100)
  if precision == nil or (precision > 1 and (algorithm ~= SLIDING_WINDOW or window < precision)) then
    return bad_argument(index + 7, 'policy ' .. i .. ' precision')
  end
  local block = integer_arg(index + 8, 0, MAX_BLOCK)
  if block == nil then return bad_argument(index + 8, 'policy ' .. i .. ' block') end
  -- wide: the algorithms that multiply counts by the window, past (capacity + 1) x window = 2^53 - 1
  -- (policy.ts needsWide; docs/semantics.md "Wide policies").
  local wide = algorithm ~= FIXED_WINDOW and algorithm ~= SLIDING_LOG and (capacity + 1) * window > MAX_INTEGER
  policies[i] = { algorithm = algorithm, window = window, limit = limit, capacity = capacity, nominal = nominal,
    count_rejected = count_rejected == 1, first_hit = first_hit == 1, precision = precision,
    usable = limit >= 1 and capacity >= 1 and nominal >= 1, wide = wide, block = block }
  index = index + 9
  if calendar then policies[i].calendar, index = calendar, index + 3 end
end

local group_count = integer_arg(index, 1)
if group_count == nil then return bad_argument(index, 'group count') end
index = index + 1
local requests_start = index
-- A validation pass that stores nothing; the decision pass below reads the same arguments again
-- (cheaper than building tables for every request).
local key_count = 0
for g = 1, group_count do
  local size = integer_arg(index, 1)
  if size == nil then return bad_argument(index, 'group size') end
  index = index + 1
  for r = 1, size do
    local policy_index = integer_arg(index, 1, policy_count)
    if policy_index == nil then return bad_argument(index, 'policy index') end
    local op = integer_arg(index + 1, OP_CONSUME, OP_ADD)
    if op == nil then return bad_argument(index + 1, 'op') end
    if op == OP_ADD then
      local a = policies[policy_index].algorithm
      if size ~= 1 or (a ~= FIXED_WINDOW and a ~= SLIDING_WINDOW) or policies[policy_index].precision > 1 or policies[policy_index].calendar then
        return bad_argument(index + 1, 'add: a group of one fixed-window or sliding-window (precision 1) request')
      end
    end
    -- A peek may cost 0: the quota as it stands (the limiter's look); an add of 0 reads the counts.
    local min_cost = 1
    if op == OP_PEEK or op == OP_ADD then min_cost = 0 end
    if integer_arg(index + 2, min_cost) == nil then return bad_argument(index + 2, 'cost') end
    -- A decision needs a positive rate and capacity (no division by 0); a reset only needs the key.
    if op ~= OP_RESET and not policies[policy_index].usable then
      return bad_argument(index, 'limit, capacity and nominal capacity must be >= 1 to decide')
    end
    key_count = key_count + 1
    index = index + 3
  end
end
if #KEYS ~= key_count then
  return redis.error_reply('ERR tollgate: ' .. #KEYS .. ' keys for ' .. key_count .. ' requests')
end

-- 2. Decide each group, then record what it admitted.
-- Decides one request: the values of level.lua.
local function decide(key, op, cost, p)
  if op == OP_RESET then
    call('DEL', key)
    return true, 0, now, 0, -1, REASON_NONE
  end
  local a = p.algorithm
  if a == SLIDING_LOG then
    return decide_sliding_log(key, now, cost, p)
  end
  if p.precision > 1 then
    local stored = pcall_redis('GET', key)
    local newest, counts
    if stored then
      if type(stored) == 'table' then return false, 0, now, 0, -1, REASON_WRONG_TYPE end
      newest, counts = parse_buckets(stored, p.precision)
      if newest == nil then return false, 0, now, 0, -1, REASON_CORRUPT_STATE end
    end
    return decide_sliding_buckets(newest, counts, now, cost, p)
  end
  -- fixed-window, the buckets and gcra: (v, end), layout.lua; a sliding window: its three counts.
  local problem, s1, s2, s3 = read_stored(key, a == SLIDING_WINDOW)
  if problem ~= REASON_NONE then return false, 0, now, 0, -1, problem end
  if a == FIXED_WINDOW then return decide_fixed_window(s1, s2, now, cost, p) end
  if a == GCRA then return decide_gcra(s1, s2, now, cost, p) end
  if a == TOKEN_BUCKET then return decide_level(s1, s2, now, cost, p, false) end
  if a == SLIDING_WINDOW then return decide_sliding_window(s1, s2, s3, now, cost, p) end
  return decide_level(s1, s2, now, cost, p, true) -- LEAKY_BUCKET
end
-- A policy's block (penalty.lua) comes before its state.
decide = with_penalties(decide, now, extra_ttl)

local function record(key, p, write, reset_at)
  -- layout.lua: an integer is stored with its end, reset_at.
  if type(write) == 'number' then
    write_pair(key, write, reset_at, now, extra_ttl)
    return
  end
  local ttl = reset_at - now
  if ttl < 1 then ttl = 1 end
  ttl = ttl + extra_ttl
  if p.algorithm ~= SLIDING_LOG then
    call('SET', key, write, 'PX', ttl)
    return
  end
  write_sliding_log(key, write, ttl)
end

local out = { now }
local n = 1
local function emit(p, allowed, remaining, reset_at, retry_after, delay, reason)
  local shown = remaining - (p.capacity - p.nominal)
  if shown < 0 then shown = 0 end
  if allowed then out[n + 1] = 1 else out[n + 1] = 0 end
  out[n + 2] = shown
  out[n + 3] = reset_at
  out[n + 4] = retry_after
  out[n + 5] = delay
  out[n + 6] = reason
  n = n + 6
end

-- Local-first sync: records cost in the window of `now` whatever the limit (the node has already
-- admitted those requests) and answers the window's counts after it, for the node's next decisions.
local function add_to_window(key, cost, p)
  local fixed = p.algorithm == FIXED_WINDOW
  local problem, s1, s2, s3 = read_stored(key, not fixed)
  if problem ~= REASON_NONE then return 0, 0, 0, problem end
  -- Unbounded: the same window arithmetic as a decision, never a denial.
  local q = { window = p.window, capacity = MAX_INTEGER, first_hit = p.first_hit, wide = p.wide }
  local _, reset_at, write
  if fixed then
    _, _, reset_at, _, _, _, write = decide_fixed_window(s1, s2, now, cost, q)
  else
    _, _, reset_at, _, _, _, write = decide_sliding_window(s1, s2, s3, now, cost, q)
  end
  if cost > 0 then record(key, p, write, reset_at) end
  if fixed then
    -- The window ends at reset_at: its mark is its index, or a first-hit window's start.
    if p.first_hit then return write, reset_at - p.window, 0, REASON_NONE end
    return write, floor_div(reset_at, p.window) - 1, 0, REASON_NONE
  end
  local _, count, mark, previous = parse_state(write, 3)
  return count, mark, previous, REASON_NONE
end

index = requests_start
local key_index = 0
for g = 1, group_count do
  local size = tonumber(ARGV[index])
  index = index + 1
  if size == 1 then
    -- The common case, a single limit: decide, record, answer; no buffering.
    key_index = key_index + 1
    local key, p = KEYS[key_index], policies[tonumber(ARGV[index])]
    local op = tonumber(ARGV[index + 1])
    if op == OP_ADD then
      local count, mark, previous, reason = add_to_window(key, tonumber(ARGV[index + 2]), p)
      out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] = 1, count, mark, previous, -1, reason
      n = n + 6
    else
      local allowed, remaining, reset_at, retry_after, delay, reason, write = decide(key, op, tonumber(ARGV[index + 2]), p)
      if op == OP_CONSUME and write ~= nil then record(key, p, write, reset_at) end
      emit(p, allowed, remaining, reset_at, retry_after, delay, reason)
    end
    index = index + 3
  else
    -- A multi-limit check: decide all, then record only if all were admitted. A key named twice
    -- is one counter: decided with the largest cost, written once (shared-keys.lua).
    local group_start = index
    local costs, firsts = shared_keys(KEYS, key_index, size, function(r) return tonumber(ARGV[group_start + (r - 1) * 3 + 2]) end)
    local written = {}
    local results = {}
    local all_allowed = true
    for r = 1, size do
      local key, p = KEYS[key_index + r], policies[tonumber(ARGV[index])]
      local op = tonumber(ARGV[index + 1])
      local allowed, remaining, reset_at, retry_after, delay, reason, write = decide(key, op, costs[r], p)
      if not allowed then all_allowed = false end
      results[r] = { key, p, op, allowed, remaining, reset_at, retry_after, delay, reason, write }
      index = index + 3
    end
    for r = 1, size do
      local x = results[r]
      -- A denied count_rejected attempt is logged even when the group is denied. A denial that
      -- only drops a log's expired entries does so where the memory store commits it: with
      -- count_rejected or a block.
      local trim_only = x[10] ~= nil and type(x[10]) == 'table' and x[10].trim_only
      if x[3] == OP_CONSUME and x[10] ~= nil and (all_allowed or not x[4]) and not written[firsts[r]]
        and (not trim_only or x[2].count_rejected or x[2].block > 0) then
        written[firsts[r]] = true
        record(x[1], x[2], x[10], x[6])
      end
      if x[3] == OP_CONSUME and x[4] and not all_allowed then
        -- Admitted but not recorded: report what actually remains (a look of cost 0).
        emit(x[2], decide(x[1], OP_PEEK, 0, x[2]))
      else
        emit(x[2], x[4], x[5], x[6], x[7], x[8], x[9])
      end
    end
    key_index = key_index + size
  end
end
return out
