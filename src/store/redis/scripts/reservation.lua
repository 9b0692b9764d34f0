--[[
  reservation.lua: the driver of reserve then settle (docs/semantics.md), one call each, atomic.
  Composed per algorithm (lua.ts RESERVATION_SCRIPTS) with that algorithm's files and adjust.lua:
  only the branches of ARGV[2]'s algorithm run.
  The reservation's record lives beside the key's state under the same hash tag (one Cluster slot):
  a string "cost mark expires settled remaining reset_at decided_at delay" (mark: where it was
  recorded, adjust.ts reservationMark: a window's start, a bucket's index, a log entry's time;
  remaining as the algorithm
  counts it, soft allowance included) (settled: the actual
  cost, -1 while open; delay -1 unless leaky-bucket), kept until the reservation's ttl passes.

  KEYS[1]   the state key
  KEYS[2]   the reservation's record key
  ARGV[1]   now: '' to use Redis TIME, else epoch ms (keys then live longer in real time, as in decide.lua)
  ARGV[2]   op: 1 reserve, 2 settle
  ARGV[3]   cost: the estimate (reserve, >= 1) or the actual cost (settle, >= 0)
  ARGV[4]   ttl: ms the reservation waits for its settle (reserve, >= 1; 0 for a settle)
  ARGV[5-13] the policy record of decide.lua (algorithm, window, limit, capacity, nominal,
            count_rejected, first_hit, precision, block); then, for a calendar window
            (first_hit 2), ARGV[14-16] its boundaries b0 < b1 < b2
  A calendar reservation counts in the period holding `now`; a `now` outside [b0, b2) is answered
  with reason 12, nothing read or written. With a block (penalty.lua) a reserve is decided as a
  consume (a blocked key answers reason 2, a denial starts the block); a settle never starts one.

  Returns now, status, reserved, settled, then a decision: allowed, remaining, reset_at,
  retry_after, delay, reason, and the instant it was made. Reserve: status 0 decided now, 1 the
  booked answer of a retry, 2 the id is booked with another cost (reserved: that cost). Settle:
  status 0 settled now, 1 settled already (nothing changed), 3 no open reservation of that id
  (nothing changed); the decision is a look at the quota after it. Reason 10 or 11: the state key
  holds another type or unreadable state, nothing was written; 12: the clock is outside the
  calendar boundaries sent.
]]
local function integer_arg(index, minimum, maximum)
  local value = tonumber(ARGV[index])
  if value == nil or value ~= floor(value) or value < minimum or value > (maximum or MAX_INTEGER) then return nil end
  return value
end
local function clock_ms()
  local time = call('TIME')
  return tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
end

-- decide.lua's MAX_REPLAY_LAG and REPLAY_SLACK (protocol.ts REPLAY_MAX_LAG_MS, REPLAY_SLACK_MS): one
-- composed script defines each constant once, so this driver keeps its own copies.
local max_replay_lag, replay_slack = 3600000, 1000
-- decide.lua's bound of a sliding window's precision (policy.ts POLICY_RANGES.precision).
local MAX_PRECISION = 100
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
local bounds = { { 1, 2 }, { 0 }, { 0 }, { 1, 6 }, { 1 }, { 1 }, { 1 }, { 1 }, { 0, 1 }, { 0, 2 }, { 1, MAX_PRECISION }, { 0, MAX_BLOCK } }
for i = 2, 13 do
  local bound = bounds[i - 1]
  if integer_arg(i, bound[1], bound[2]) == nil or #KEYS ~= 2 then
    return redis.error_reply('ERR tollgate: argument ' .. i .. ' (reservation) is not valid: ' .. tostring(ARGV[i]))
  end
end
local algorithm, window, capacity, precision = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[8]), tonumber(ARGV[12])
if precision > 1 and (algorithm ~= SLIDING_WINDOW or precision > window) then return redis.error_reply('ERR tollgate: argument 12 (reservation) is not valid: precision ' .. precision) end
local calendar = nil
if ARGV[11] == '2' then
  calendar = { integer_arg(14, 0), integer_arg(15, 0), integer_arg(16, 0) }
  if algorithm ~= FIXED_WINDOW or calendar[1] == nil or calendar[2] == nil or calendar[3] == nil or calendar[1] >= calendar[2] or calendar[2] >= calendar[3] then
    return redis.error_reply('ERR tollgate: argument 14 (reservation) is not valid: calendar boundaries b0 < b1 < b2')
  end
end
local p = { algorithm = algorithm, window = window, limit = tonumber(ARGV[7]), capacity = capacity, nominal = tonumber(ARGV[9]),
  count_rejected = ARGV[10] == '1', first_hit = ARGV[11] == '1', precision = precision, calendar = calendar, block = tonumber(ARGV[13]),
  wide = algorithm ~= FIXED_WINDOW and (capacity + 1) * window > MAX_INTEGER }
local reserving, cost, ttl = ARGV[2] == '1', tonumber(ARGV[3]), tonumber(ARGV[4])
local state_key, record_key = KEYS[1], KEYS[2]

-- The stored state (a sliding log: its type only; sliding-log.lua reads its ends itself), and the
-- decision of `units` on it (cost 0: a look).
local sliding_log, buckets = algorithm == SLIDING_LOG, algorithm == SLIDING_WINDOW and precision > 1
local function read_state()
  if sliding_log then
    if type(pcall_redis('LINDEX', state_key, 0)) == 'table' then return REASON_WRONG_TYPE end
    return REASON_NONE
  end
  if not buckets then return read_stored(state_key, algorithm == SLIDING_WINDOW) end
  local stored = pcall_redis('GET', state_key)
  if not stored then return REASON_NONE end
  if type(stored) == 'table' then return REASON_WRONG_TYPE end
  local index, counts = parse_buckets(stored, precision)
  if index == nil then return REASON_CORRUPT_STATE end
  return REASON_NONE, index, counts
end
local problem, s1, s2, s3 = read_state()
local function decide_state(_, _, units)
  if sliding_log then return decide_sliding_log(state_key, now, units, p) end
  if buckets then return decide_sliding_buckets(s1, s2, now, units, p) end
  if algorithm == FIXED_WINDOW then return decide_fixed_window(s1, s2, now, units, p) end
  if algorithm == GCRA then return decide_gcra(s1, s2, now, units, p) end
  if algorithm == SLIDING_WINDOW then return decide_sliding_window(s1, s2, s3, now, units, p) end
  return decide_level(s1, s2, now, units, p, algorithm == LEAKY_BUCKET)
end
-- The key's block (penalty.lua) before its state: a reserve is a consume (a denial starts a block),
-- a look a peek (blocked: denied until the block's end).
local decide_blocked = with_penalties(decide_state, now, extra_ttl)
local function decide(units) return decide_blocked(state_key, OP_CONSUME, units, p) end
local function answer(status, reserved, settled, allowed, remaining, reset_at, retry_after, delay, reason, decided_at)
  local shown = remaining - (capacity - p.nominal)
  if shown < 0 then shown = 0 end
  if allowed then allowed = 1 else allowed = 0 end
  return { now, status, reserved, settled, allowed, shown, reset_at, retry_after, delay, reason, decided_at }
end
if problem ~= REASON_NONE then return answer(0, 0, -1, false, 0, now, 0, -1, problem, now) end
-- A calendar period holds `now`, or nothing is decided (the clocks disagree: decide.lua's reason 12).
if calendar and calendar_period(calendar, now) == nil then return answer(0, 0, -1, false, 0, now, 0, -1, REASON_CLOCK_OUTSIDE_PERIODS, now) end
-- A look (cost 0) at the state as it stands, made now.
local function look()
  local allowed, remaining, reset_at, retry_after, delay, reason = decide_blocked(state_key, OP_PEEK, 0, p)
  return allowed, remaining, reset_at, retry_after, delay, reason, now
end

-- The open record: its fields, or nil (none, or its ttl has passed).
local record
local stored_record = call('GET', record_key)
if stored_record then
  record = {}
  for field in string.gmatch(stored_record, '%S+') do record[#record + 1] = tonumber(field) end
  if #record ~= 8 or now >= record[3] then record = nil end
end

if reserving then
  if record then
    if record[1] ~= cost then return answer(2, record[1], record[4], false, 0, now, 0, -1, REASON_NONE, now) end
    return answer(1, record[1], record[4], true, record[5], record[6], 0, record[8], REASON_NONE, record[7])
  end
  local allowed, remaining, reset_at, retry_after, delay, reason, write = decide(cost)
  if write ~= nil then
    local life = reset_at - now
    if life < 1 then life = 1 end
    if sliding_log then
      write_sliding_log(state_key, write, life + extra_ttl)
    elseif algorithm == SLIDING_WINDOW then
      call('SET', state_key, write, 'PX', life + extra_ttl)
    else
      write_pair(state_key, write, reset_at, now, extra_ttl)
    end
  end
  -- A refused reservation debits nothing and is not booked: a retry decides afresh.
  if not allowed then return answer(0, 0, -1, allowed, remaining, reset_at, retry_after, delay, reason, now) end
  -- The window it is recorded in: its start (a calendar period: its end, which names it).
  local mark = 0
  if algorithm == FIXED_WINDOW then mark = reset_at - window end
  if calendar then mark = reset_at end
  if sliding_log then mark = tonumber(string.match(write.entry, '^%d+')) end
  if buckets then mark = tonumber(string.match(write, '^%d+')) end
  if algorithm == SLIDING_WINDOW and not buckets then
    local _, _, index = parse_state(write, 3)
    mark = index * window
  end
  call('SET', record_key, format('%d %d %d -1 %d %d %d %d', cost, mark, now + ttl, remaining, reset_at, now, delay), 'PX', ttl + extra_ttl)
  return answer(0, cost, -1, allowed, remaining, reset_at, retry_after, delay, reason, now)
end

-- Settle.
if not record then return answer(3, 0, -1, look()) end
if record[4] >= 0 then return answer(1, record[1], record[4], look()) end
local units = cost - record[1]
if units ~= 0 then
  if sliding_log and units < 0 then
    refund_sliding_log(state_key, now, units, record[2], p)
  elseif sliding_log then
    charge_sliding_log(state_key, now, units, p, extra_ttl)
  elseif buckets then
    adjust_sliding_buckets(state_key, s1, s2, now, units, record[2], p, extra_ttl)
  elseif algorithm == FIXED_WINDOW then
    adjust_fixed_window(state_key, s1, s2, now, units, record[2], p, extra_ttl)
  elseif algorithm == SLIDING_WINDOW then
    adjust_sliding_window(state_key, s1, s2, s3, now, units, record[2], p, extra_ttl)
  else
    adjust_level(state_key, s1, s2, now, units, p, extra_ttl)
  end
  problem, s1, s2, s3 = read_state()
end
call('SET', record_key, format('%d %d %d %d %d %d %d %d', record[1], record[2], record[3], cost, record[5], record[6], record[7], record[8]), 'KEEPTTL')
return answer(0, record[1], cost, look())
