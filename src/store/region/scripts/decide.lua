--[[
  region/decide.lua: decides a group of rate limit requests in one region, atomically, on that
  region's own Redis. Composed after redis/scripts/prelude.lua, fixed-window.lua and
  sliding-window.lua, whose decide_fixed_window / decide_sliding_window it calls, so one region
  alone computes exactly what the single-Redis store computes.

  State: one hash per (caller's key, algorithm, window), a G-counter per window: field
  "<region>:<window index>" = what that region counted in that window. A region only ever
  increments its own fields (HINCRBY); the replicator copies them to the other regions, which keep
  the maximum (merge.lua). A decision sums every region's fields of the window it needs.

  KEYS[1]      the region's change log (sorted set: member = hash key, score = change sequence)
  KEYS[2]      the region's change sequence counter
  KEYS[3..]    the hash of each request, in order
  ARGV[1]      now: '' to use Redis TIME, else epoch ms
  ARGV[2]      this region's name (the only fields this script writes)
  ARGV[3]      op: 1 consume (all-or-nothing over the group), 2 peek (record nothing), 3 reset (delete)
  ARGV[4..]    6 per request: algorithm (3 fixed-window, 5 sliding-window), window ms, capacity,
               nominal capacity, count_rejected (0/1), cost

  Returns now, then 6 integers per request as redis/scripts/decide.lua does (protocol.ts decodes
  both): allowed, remaining, reset_at, retry_after, delay (-1), reason (10 wrong type, 11 corrupt).
]]
local FIXED_WINDOW, SLIDING_WINDOW = 3, 5
local OP_CONSUME, OP_PEEK, OP_RESET = 1, 2, 3
local MAX_INTEGER = 9007199254740991
-- An explicit `now` behind Redis TIME keeps keys alive that much longer (at most an hour), as decide.lua does.
local MAX_REPLAY_LAG = 3600000
local REPLAY_SLACK = 1000

local log_key, sequence_key = KEYS[1], KEYS[2]
local region = ARGV[2]
local op = tonumber(ARGV[3])

local function clock_ms()
  local time = call('TIME')
  return tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
end
local now = clock_ms()
local extra_ttl = 0
if ARGV[1] ~= '' then
  local given = parse_integer(ARGV[1])
  if given == nil or given < 0 then return redis.error_reply('ERR tollgate: now is not valid: ' .. tostring(ARGV[1])) end
  local lag = now - given
  if lag < 0 then lag = 0 end
  if lag > MAX_REPLAY_LAG then lag = MAX_REPLAY_LAG end
  extra_ttl = lag + REPLAY_SLACK
  now = given
end

-- Sums the hash's fields by window index. Returns the sums, the latest index counted (nil: none),
-- and the fields by index (to prune); or nil and a reason code.
local function read_counts(key)
  local flat = pcall_redis('HGETALL', key)
  if flat.err then return nil, REASON_WRONG_TYPE end
  local sums, latest = {}, nil
  for i = 1, #flat, 2 do
    local colon = find(flat[i], ':', 1, true)
    if colon == nil then return nil, REASON_CORRUPT_STATE end
    local index, count = parse_integer(sub(flat[i], colon + 1)), parse_integer(flat[i + 1])
    if index == nil or count == nil or count < 0 then return nil, REASON_CORRUPT_STATE end
    sums[index] = (sums[index] or 0) + count
    if count > 0 and (latest == nil or index > latest) then latest = index end
  end
  return sums, latest, flat
end

-- Decides one request as the single-Redis script would on the state "latest window, its count,
-- the count of the window before": the same values, plus the window index to record into.
local function decide(key, p, cost)
  local sums, latest, flat = read_counts(key)
  if sums == nil then return { false, 0, now, 0, -1, latest } end
  local current, previous = nil, nil
  if latest ~= nil then current, previous = sums[latest], sums[latest - 1] or 0 end
  local r
  if p.algorithm == FIXED_WINDOW then
    -- Its state is (count, the window's end).
    local stored_end
    if latest ~= nil then stored_end = (latest + 1) * p.window end
    r = { decide_fixed_window(current, stored_end, now, cost, p) }
    -- r[7] is the count the single-Redis store would write; its window ends at r[3].
    if r[7] ~= nil then r[7] = floor_div(r[3], p.window) - 1 end
  else
    r = { decide_sliding_window(current, latest, previous, now, cost, p) }
    -- r[7] is the state the single-Redis store would write; its second number is the window index.
    if r[7] ~= nil then
      local _, _, index = parse_state(r[7], 3)
      r[7] = index
    end
  end
  r[8] = flat
  return r
end

-- Adds `cost` to this region's field of window `index`, drops fields no decision reads any more,
-- keeps the hash while a decision can still read it, and logs the change for the replicator.
local function record(key, p, cost, index, flat)
  call('HINCRBY', key, region .. ':' .. index, cost)
  local keep_from = index
  if p.algorithm == SLIDING_WINDOW then keep_from = index - 1 end
  for i = 1, #flat, 2 do
    local field_index = parse_integer(sub(flat[i], find(flat[i], ':', 1, true) + 1))
    if field_index < keep_from then call('HDEL', key, flat[i]) end
  end
  local windows_read = 1
  if p.algorithm == SLIDING_WINDOW then windows_read = 2 end
  local ttl = (index + windows_read) * p.window - now
  if ttl < 1 then ttl = 1 end
  ttl = ttl + extra_ttl
  if call('PTTL', key) < ttl then call('PEXPIRE', key, ttl) end
  call('ZADD', log_key, call('INCR', sequence_key), key)
end

local policies, costs = {}, {}
local count = #KEYS - 2
for i = 1, count do
  local at = 4 + (i - 1) * 6
  local algorithm, window = tonumber(ARGV[at]), tonumber(ARGV[at + 1])
  local capacity, nominal = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
  policies[i] = { algorithm = algorithm, window = window, capacity = capacity, nominal = nominal,
    count_rejected = ARGV[at + 4] == '1', first_hit = false,
    wide = algorithm == SLIDING_WINDOW and (capacity + 1) * window > MAX_INTEGER }
  costs[i] = tonumber(ARGV[at + 5])
end

local out = { now }
local function emit(p, allowed, remaining, reset_at, retry_after, delay, reason)
  local shown = remaining - (p.capacity - p.nominal)
  if shown < 0 then shown = 0 end
  local n = #out
  if allowed then out[n + 1] = 1 else out[n + 1] = 0 end
  out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6] = shown, reset_at, retry_after, delay, reason
end

if op == OP_RESET then
  for i = 1, count do
    call('DEL', KEYS[i + 2])
    emit(policies[i], true, 0, now, 0, -1, REASON_NONE)
  end
  return out
end

-- A key named twice is one counter: decided with the largest cost, written once (shared-keys.lua).
local shared_costs, firsts = shared_keys(KEYS, 2, count, function(i) return costs[i] end)
local written = {}
local results, all_allowed = {}, true
for i = 1, count do
  results[i] = decide(KEYS[i + 2], policies[i], shared_costs[i])
  if not results[i][1] then all_allowed = false end
end
for i = 1, count do
  local r, p, key = results[i], policies[i], KEYS[i + 2]
  -- A denied count_rejected hit is counted even when the group is denied, as in decide.lua.
  local recorded = op == OP_CONSUME and r[7] ~= nil and (all_allowed or not r[1]) and not written[firsts[i]]
  if recorded then
    written[firsts[i]] = true
    record(key, p, shared_costs[i], r[7], r[8])
  end
  if op == OP_CONSUME and r[1] and not all_allowed then
    -- Admitted but not recorded: report what actually remains (a look of cost 0).
    local look = decide(key, p, 0)
    emit(p, look[1], look[2], look[3], look[4], look[5], look[6])
  else
    emit(p, r[1], r[2], r[3], r[4], r[5], r[6])
  end
end
return out
