--[[
  single.lua: the lean driver for the common case, one decision alone in its call (nothing else was
  waiting to share it): one key, one policy, a consume or a peek, on Redis TIME or on the caller's
  clock (redisStore({ clock: 'caller' })). It decides exactly as decide.lua does (the same algorithm
  files, state and reply) but binds 3 or 4 arguments instead of a batch's policy table and request
  records, and is composed with only its algorithm's files, layout.lua and codes.lua (scripts.ts
  prepends `local ALGORITHM = <its code's name>`). In the Functions library (scripts.ts
  LEAN_LIBRARY) the part above PER_CALL runs once per load and the part below it on every FCALL.
  Sliding-log, an explicit `now`, a reset, a local-first add and every batch of two or more go
  through decide.lua.

  KEYS[1]  the state key
  ARGV[1]  the policy      "window limit capacity nominal flags", one space between them; every
                           field a whole number in [0, 2^53 - 1]: window ms >= 1, limit >= 1,
                           capacity >= 1 (what is admitted, soft allowance included), nominal >= 1
                           (the capacity `remaining` counts down from), flags count_rejected (1) +
                           first_hit (2)
  ARGV[2]  op              1 consume, 2 peek (record nothing)
  ARGV[3]  cost            integer >= 1 (>= 0 for a peek)
  ARGV[4]  now             optional: the caller's clock, epoch ms (no Redis TIME). The key is then
                           written as the string "v end" and kept CALLER_CLOCK_SLACK ms past its
                           end, counted by Redis from the write (PX): nodes whose clocks differ by
                           up to that much all find it until their own clock passes its end.

  Returns what decide.lua returns for a batch of one: now, then allowed, remaining, reset_at,
  retry_after, delay, reason.

  Per call this parses as little as it can (tonumber is Redis's costliest Lua step here, ~0.3 µs
  each): a policy's text is parsed and checked once and its table kept, read-only, in
  `policies` (a set per algorithm; all emptied once they hold POLICY_CACHE_SIZE in all), the op is
  compared as text, a cost of 1 is not parsed.
]]
local CALLER_CLOCK_SLACK = 1000
local ARGS_ON_REDIS_TIME = 3
local ARGS_ON_CALLER_CLOCK = 4
local POLICY_CACHE_SIZE = 256
local CONSUME_ARG, PEEK_ARG = tostring(OP_CONSUME), tostring(OP_PEEK)

-- A whole number in [0, 2^53 - 1], or nil.
local function whole(text)
  local value = tonumber(text)
  if value == nil or value ~= floor(value) or value < 0 or value > MAX_INTEGER then return nil end
  return value
end

-- The policy table of a policy argument, or nil when it is not five whole numbers in range.
local function parse_policy(text, algorithm)
  local fields, from = {}, 1
  for i = 1, 5 do
    local space = find(text, ' ', from, true)
    if (space == nil) ~= (i == 5) then return nil end
    fields[i] = whole(sub(text, from, (space or 0) - 1))
    if fields[i] == nil then return nil end
    if space then from = space + 1 end
  end
  local window, limit, capacity, nominal, flags = fields[1], fields[2], fields[3], fields[4], fields[5]
  if window < 1 or limit < 1 or capacity < 1 or nominal < 1 or flags > 3 then return nil end
  return { algorithm = algorithm, window = window, limit = limit, capacity = capacity, nominal = nominal,
    count_rejected = flags % 2 == 1, first_hit = flags >= 2,
    wide = algorithm ~= FIXED_WINDOW and (capacity + 1) * window > MAX_INTEGER }
end

-- Parsed policies: policies[algorithm][text]; never changed once made, so calls may share them.
local policies, cached = {}, 0

-- Only the branch of `algorithm` runs (the others name functions a lean script was not composed with).
local function decide(algorithm, key, now, cost, p)
  local problem, s1, s2, s3 = read_stored(key, algorithm == SLIDING_WINDOW)
  if problem ~= REASON_NONE then return false, 0, now, 0, -1, problem end
  if algorithm == FIXED_WINDOW then return decide_fixed_window(s1, s2, now, cost, p) end
  if algorithm == GCRA then return decide_gcra(s1, s2, now, cost, p) end
  if algorithm == SLIDING_WINDOW then return decide_sliding_window(s1, s2, s3, now, cost, p) end
  return decide_level(s1, s2, now, cost, p, algorithm ~= TOKEN_BUCKET)
end

-- PER_CALL

local argc = #ARGV
if #KEYS ~= 1 or (argc ~= ARGS_ON_REDIS_TIME and argc ~= ARGS_ON_CALLER_CLOCK) then
  return redis.error_reply('ERR tollgate: single decision arguments out of range: ' .. #KEYS .. ' keys, ' .. argc .. ' arguments')
end
local known = policies[ALGORITHM]
if known == nil then
  known = {}
  policies[ALGORITHM] = known
end
local p = known[ARGV[1]]
if p == nil then
  p = parse_policy(ARGV[1], ALGORITHM)
  if p == nil then return redis.error_reply('ERR tollgate: argument 1 is not valid: ' .. ARGV[1]) end
  if cached >= POLICY_CACHE_SIZE then
    policies, cached = { [ALGORITHM] = {} }, 0
    known = policies[ALGORITHM]
  end
  known[ARGV[1]] = p
  cached = cached + 1
end
local consume = ARGV[2] == CONSUME_ARG
if not consume and ARGV[2] ~= PEEK_ARG then return redis.error_reply('ERR tollgate: argument 2 is not valid: ' .. ARGV[2]) end
local cost = 1
if ARGV[3] ~= '1' then cost = whole(ARGV[3]) end
if cost == nil or (consume and cost < 1) then return redis.error_reply('ERR tollgate: argument 3 is not valid: ' .. ARGV[3]) end

local now, extra_ttl = nil, 0
if argc == ARGS_ON_REDIS_TIME then
  local time = call('TIME')
  now = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
else
  now = whole(ARGV[4])
  if now == nil then return redis.error_reply('ERR tollgate: argument 4 is not valid: ' .. ARGV[4]) end
  extra_ttl = CALLER_CLOCK_SLACK
end
local key = KEYS[1]

local allowed, remaining, reset_at, retry_after, delay, reason, write = decide(ALGORITHM, key, now, cost, p)
if consume and write ~= nil then
  if ALGORITHM == SLIDING_WINDOW then
    local ttl = reset_at - now
    if ttl < 1 then ttl = 1 end
    call('SET', key, write, 'PX', ttl + extra_ttl)
  elseif extra_ttl == 0 then
    -- On Redis TIME the state's end is reset_at: the key expires exactly then (layout.lua's
    -- write_pair). Numbers as they are: Redis writes a Lua number's digits as %.17g does, exact
    -- for a whole number below 2^53, without string.format's Lua string.
    call('SET', key, write, 'PXAT', reset_at)
  else
    -- On the caller's clock it keeps "v end" and lives CALLER_CLOCK_SLACK past it.
    write_pair(key, write, reset_at, now, extra_ttl)
  end
end
local shown = remaining - (p.capacity - p.nominal)
if shown < 0 then shown = 0 end
if allowed then allowed = 1 else allowed = 0 end
return { now, allowed, shown, reset_at, retry_after, delay, reason }
