--[[
  single.lua: the lean driver for the common case, one decision alone in its call (nothing else was
  waiting to share it): one key, one policy, a consume or a peek, on Redis TIME or on the caller's
  clock (redisStore({ clock: 'caller' })). It decides exactly as decide.lua does (the same algorithm
  files, state and reply) but binds 7 or 8 arguments instead of a batch's policy table and request
  records, and is composed with only its algorithm's files, layout.lua and codes.lua (scripts.ts
  prepends `local ALGORITHM = <its code's name>`). In the Functions library (scripts.ts
  LEAN_LIBRARY) the part above PER_CALL runs once per load and the part below it on every FCALL, so
  a decision allocates no table but Redis TIME's reply and its own reply (the Lua garbage a call
  leaves is Redis time too). Sliding-log, an explicit `now`, a reset, a local-first add and every
  batch of two or more go through decide.lua.

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

-- An argument as a whole number in [0, 2^53 - 1], else nil (for a missing one too).
local function whole(text)
  local value = text and tonumber(text)
  if value == nil or value ~= floor(value) or value < 0 or value > MAX_INTEGER then return nil end
  return value
end

-- The policy the algorithm files read (p.window, p.capacity...): one table, every field set again
-- on each call (a script runs alone, and no algorithm keeps it), so none is allocated per decision.
-- p.calendar is never set: a calendar window takes the batch script.
local p = {}

-- PER_CALL
local argc = #ARGV
local window, limit, capacity, nominal = whole(ARGV[1]), whole(ARGV[2]), whole(ARGV[3]), whole(ARGV[4])
local flags, op, cost = whole(ARGV[5]), whole(ARGV[6]), whole(ARGV[7])
local now, extra_ttl = nil, 0
if argc == ARGS_ON_CALLER_CLOCK then now, extra_ttl = whole(ARGV[8]), CALLER_CLOCK_SLACK end
if not (window and limit and capacity and nominal and flags and op and cost) or (argc == ARGS_ON_CALLER_CLOCK and not now) then
  for i = 1, ARGS_ON_CALLER_CLOCK do
    if whole(ARGV[i]) == nil and (i <= ARGS_ON_REDIS_TIME or i <= argc) then
      return redis.error_reply('ERR tollgate: argument ' .. i .. ' is not valid: ' .. tostring(ARGV[i]))
    end
  end
end
if #KEYS ~= 1 or argc > ARGS_ON_CALLER_CLOCK or window < 1 or limit < 1 or capacity < 1 or nominal < 1 or flags > 3
  or (op ~= OP_CONSUME and op ~= OP_PEEK) or (op == OP_CONSUME and cost < 1) then
  return redis.error_reply('ERR tollgate: single decision arguments out of range: ' .. table.concat(ARGV, ' '))
end
p.algorithm, p.window, p.limit, p.capacity, p.nominal = ALGORITHM, window, limit, capacity, nominal
p.count_rejected, p.first_hit = flags % 2 == 1, flags >= 2
p.wide = ALGORITHM ~= FIXED_WINDOW and (capacity + 1) * window > MAX_INTEGER

if now == nil then
  local time = call('TIME')
  now = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
end
local key = KEYS[1]

-- Only the branch of this script's ALGORITHM runs (the others name functions it was not composed with).
local allowed, remaining, reset_at, retry_after, delay, reason, write
local problem, s1, s2, s3 = read_stored(key, ALGORITHM == SLIDING_WINDOW)
if problem ~= REASON_NONE then
  allowed, remaining, reset_at, retry_after, delay, reason = false, 0, now, 0, -1, problem
elseif ALGORITHM == FIXED_WINDOW then
  allowed, remaining, reset_at, retry_after, delay, reason, write = decide_fixed_window(s1, s2, now, cost, p)
elseif ALGORITHM == GCRA then
  allowed, remaining, reset_at, retry_after, delay, reason, write = decide_gcra(s1, s2, now, cost, p)
elseif ALGORITHM == SLIDING_WINDOW then
  allowed, remaining, reset_at, retry_after, delay, reason, write = decide_sliding_window(s1, s2, s3, now, cost, p)
else
  allowed, remaining, reset_at, retry_after, delay, reason, write = decide_level(s1, s2, now, cost, p, ALGORITHM ~= TOKEN_BUCKET)
end

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
