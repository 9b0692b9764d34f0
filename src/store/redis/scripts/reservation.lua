--[[
  reservation.lua: the driver of reserve then settle (docs/semantics.md), one call each, atomic.
  Composed per algorithm (lua.ts RESERVATION_SCRIPTS) with that algorithm's files and adjust.lua:
  only the branches of ARGV[2]'s algorithm run.
  The reservation's record lives beside the key's state under the same hash tag (one Cluster slot):
  a string "cost mark expires settled remaining reset_at decided_at delay" (remaining as the algorithm
  counts it, soft allowance included) (settled: the actual
  cost, -1 while open; delay -1 unless leaky-bucket), kept until the reservation's ttl passes.

  KEYS[1]   the state key
  KEYS[2]   the reservation's record key
  ARGV[1]   now: '' to use Redis TIME, else epoch ms (keys then live longer in real time, as in decide.lua)
  ARGV[2-9] the policy record of decide.lua (algorithm, window, limit, capacity, nominal,
            count_rejected, first_hit, precision); not sliding-log nor precision > 1
  ARGV[10]  op: 1 reserve, 2 settle
  ARGV[11]  cost: the estimate (reserve, >= 1) or the actual cost (settle, >= 0)
  ARGV[12]  ttl: ms the reservation waits for its settle (reserve, >= 1; 0 for a settle)

  Returns now, status, reserved, settled, then a decision: allowed, remaining, reset_at,
  retry_after, delay, reason, and the instant it was made. Reserve: status 0 decided now, 1 the
  booked answer of a retry, 2 the id is booked with another cost (reserved: that cost). Settle:
  status 0 settled now, 1 settled already (nothing changed), 3 no open reservation of that id
  (nothing changed); the decision is a look at the quota after it. Reason 10 or 11: the state key
  holds another type or unreadable state, nothing was written.
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
local bounds = { { 1, 6 }, { 1 }, { 1 }, { 1 }, { 1 }, { 0, 1 }, { 0, 1 }, { 1, 1 }, { 1, 2 }, { 0 }, { 0 } }
for i = 2, 12 do
  local bound = bounds[i - 1]
  if integer_arg(i, bound[1], bound[2]) == nil or #KEYS ~= 2 then
    return redis.error_reply('ERR tollgate: argument ' .. i .. ' (reservation) is not valid: ' .. tostring(ARGV[i]))
  end
end
local algorithm, window, capacity = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[5])
if algorithm == SLIDING_LOG then return redis.error_reply('ERR tollgate: argument 2 (reservation) is not valid: sliding-log') end
local p = { algorithm = algorithm, window = window, limit = tonumber(ARGV[4]), capacity = capacity, nominal = tonumber(ARGV[6]),
  count_rejected = ARGV[7] == '1', first_hit = ARGV[8] == '1', precision = 1,
  wide = algorithm ~= FIXED_WINDOW and (capacity + 1) * window > MAX_INTEGER }
local reserving, cost, ttl = ARGV[10] == '1', tonumber(ARGV[11]), tonumber(ARGV[12])
local state_key, record_key = KEYS[1], KEYS[2]

-- The stored state, and the decision of `units` on it (cost 0: a look).
local problem, s1, s2, s3 = read_stored(state_key, algorithm == SLIDING_WINDOW)
local function decide(units)
  if algorithm == FIXED_WINDOW then return decide_fixed_window(s1, s2, now, units, p) end
  if algorithm == GCRA then return decide_gcra(s1, s2, now, units, p) end
  if algorithm == SLIDING_WINDOW then return decide_sliding_window(s1, s2, s3, now, units, p) end
  return decide_level(s1, s2, now, units, p, algorithm == LEAKY_BUCKET)
end
local function answer(status, reserved, settled, allowed, remaining, reset_at, retry_after, delay, reason, decided_at)
  local shown = remaining - (capacity - p.nominal)
  if shown < 0 then shown = 0 end
  if allowed then allowed = 1 else allowed = 0 end
  return { now, status, reserved, settled, allowed, shown, reset_at, retry_after, delay, reason, decided_at }
end
if problem ~= REASON_NONE then return answer(0, 0, -1, false, 0, now, 0, -1, problem, now) end
-- A look (cost 0) at the state as it stands, made now.
local function look()
  local allowed, remaining, reset_at, retry_after, delay, reason = decide(0)
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
    if algorithm == SLIDING_WINDOW then
      local life = reset_at - now
      if life < 1 then life = 1 end
      call('SET', state_key, write, 'PX', life + extra_ttl)
    else
      write_pair(state_key, write, reset_at, now, extra_ttl)
    end
  end
  -- A refused reservation debits nothing and is not booked: a retry decides afresh.
  if not allowed then return answer(0, 0, -1, allowed, remaining, reset_at, retry_after, delay, reason, now) end
  local mark = 0
  if algorithm == FIXED_WINDOW then mark = reset_at - window end
  if algorithm == SLIDING_WINDOW then
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
  if algorithm == FIXED_WINDOW then
    adjust_fixed_window(state_key, s1, s2, now, units, record[2], p, extra_ttl)
  elseif algorithm == SLIDING_WINDOW then
    adjust_sliding_window(state_key, s1, s2, s3, now, units, record[2], p, extra_ttl)
  else
    adjust_level(state_key, s1, s2, now, units, p, extra_ttl)
  end
  problem, s1, s2, s3 = read_stored(state_key, algorithm == SLIDING_WINDOW)
end
call('SET', record_key, format('%d %d %d %d %d %d %d %d', record[1], record[2], record[3], cost, record[5], record[6], record[7], record[8]), 'KEEPTTL')
return answer(0, record[1], cost, look())
