--[[
  single.lua: the lean driver for the common case, one decision alone in its call (nothing else was
  waiting to share it): one key, one policy, a consume or a peek, on Redis TIME or on the caller's
  clock (redisStore({ clock: 'caller' })). It decides exactly as decide.lua does (the same algorithm
  files, state and reply) but binds 7 or 8 arguments instead of a batch's policy table and request
  records, and is composed with only its algorithm's files, layout.lua and codes.lua (scripts.ts
  prepends `local ALGORITHM = <its code's name>`). In the Functions library (scripts.ts
  LEAN_LIBRARY) the part above PER_CALL runs once per load and the part below it on every FCALL.
  Sliding-log, an explicit `now`, a reset, a local-first add and every batch of two or more go
  through decide.lua.

  KEYS[1]  the state key
  ARGV[1]  window          ms, integer >= 1
  ARGV[2]  limit           integer >= 1
  ARGV[3]  capacity        integer >= 1, what is admitted, soft allowance included
  ARGV[4]  nominal         integer >= 1, the capacity `remaining` counts down from
  ARGV[5]  flags           count_rejected (1) + first_hit (2)
  ARGV[6]  op              1 consume, 2 peek (record nothing)
  ARGV[7]  cost            integer >= 1 (>= 0 for a peek)
  ARGV[8]  now             optional: the caller's clock, epoch ms (no Redis TIME). The key is then
                           written as the string "v end" and kept CALLER_CLOCK_SLACK ms past its
                           end, counted by Redis from the write (PX): nodes whose clocks differ by
                           up to that much all find it until their own clock passes its end.

  Returns what decide.lua returns for a batch of one: now, then allowed, remaining, reset_at,
  retry_after, delay, reason.
]]
local CALLER_CLOCK_SLACK = 1000
local ARGS_ON_REDIS_TIME = 7
local ARGS_ON_CALLER_CLOCK = 8

-- PER_CALL

-- Every argument is a whole number in [0, 2^53 - 1]; the lower bounds that differ follow.
local argc = #ARGV
local args = {}
for i = 1, (argc == ARGS_ON_CALLER_CLOCK) and ARGS_ON_CALLER_CLOCK or ARGS_ON_REDIS_TIME do
  local value = tonumber(ARGV[i])
  if value == nil or value ~= floor(value) or value < 0 or value > MAX_INTEGER then
    return redis.error_reply('ERR tollgate: argument ' .. i .. ' is not valid: ' .. tostring(ARGV[i]))
  end
  args[i] = value
end
local window, limit, capacity, nominal, flags, op, cost = args[1], args[2], args[3], args[4], args[5], args[6], args[7]
if #KEYS ~= 1 or argc > ARGS_ON_CALLER_CLOCK or window < 1 or limit < 1 or capacity < 1 or nominal < 1 or flags > 3
  or (op ~= OP_CONSUME and op ~= OP_PEEK) or (op == OP_CONSUME and cost < 1) then
  return redis.error_reply('ERR tollgate: single decision arguments out of range: ' .. table.concat(ARGV, ' '))
end
local p = { algorithm = ALGORITHM, window = window, limit = limit, capacity = capacity, nominal = nominal,
  count_rejected = flags % 2 == 1, first_hit = flags >= 2,
  wide = ALGORITHM ~= FIXED_WINDOW and (capacity + 1) * window > MAX_INTEGER }

local now, extra_ttl = args[8], 0
if now == nil then
  local time = call('TIME')
  now = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
else
  extra_ttl = CALLER_CLOCK_SLACK
end
local key = KEYS[1]

-- Only the branch of this script's ALGORITHM runs (the others name functions it was not composed with).
local function decide()
  local problem, s1, s2, s3 = read_stored(key, ALGORITHM == SLIDING_WINDOW)
  if problem ~= REASON_NONE then return false, 0, now, 0, -1, problem end
  if ALGORITHM == FIXED_WINDOW then return decide_fixed_window(s1, s2, now, cost, p) end
  if ALGORITHM == GCRA then return decide_gcra(s1, s2, now, cost, p) end
  if ALGORITHM == SLIDING_WINDOW then return decide_sliding_window(s1, s2, s3, now, cost, p) end
  return decide_level(s1, s2, now, cost, p, ALGORITHM ~= TOKEN_BUCKET)
end

local allowed, remaining, reset_at, retry_after, delay, reason, write = decide()
if op == OP_CONSUME and write ~= nil then
  if ALGORITHM == SLIDING_WINDOW then
    local ttl = reset_at - now
    if ttl < 1 then ttl = 1 end
    call('SET', key, write, 'PX', ttl + extra_ttl)
  else
    -- On Redis TIME the state's end is reset_at: the key expires exactly then (layout.lua); on the
    -- caller's clock it keeps "v end" and lives CALLER_CLOCK_SLACK past it.
    write_pair(key, write, reset_at, now, extra_ttl)
  end
end
local shown = remaining - (capacity - nominal)
if shown < 0 then shown = 0 end
if allowed then allowed = 1 else allowed = 0 end
return { now, allowed, shown, reset_at, retry_after, delay, reason }
