--[[
  penalty.lua: penalties (a policy's block, `blockDuration`) beside the state, for decide.lua.
  A consume that the state denies (no special reason) starts a block: the string key
  `<state key>!b` holds the block's end (epoch ms) and expires then (plus the replay's extra time).
  It shares the state key's hash tag, so the same Cluster slot, and is written in the same script
  as the denial, which answers REASON_BLOCK_STARTED (reason blocked, the block's first denial). Until
  the block's end every consume or peek of that state is denied with reason REASON_BLOCKED, nothing is counted, and the block is not extended; a reset deletes it. The
  memory store does the same (store/penalty.ts).
]]
local REASON_BLOCKED = 2
-- The denial that started the block (the service counts blocks started).
local REASON_BLOCK_STARTED = 3
-- The longest block, ms (policy.ts POLICY_RANGES.blockDuration: 30 days).
local MAX_BLOCK = 2592000000

local function block_key(key) return key .. '!b' end

-- The block's end stored for `key`, or nil (no block, or a value that is not one: ignored).
local function block_end(key)
  local stored = pcall_redis('GET', block_key(key))
  if type(stored) ~= 'string' then return nil end
  return parse_integer(stored)
end

-- `decide_state(key, op, cost, p)` (decide.lua's decide) wrapped with the policy's block, if it has one.
local function with_penalties(decide_state, now, extra_ttl)
  return function(key, op, cost, p)
    if op == OP_RESET then call('DEL', block_key(key)) end
    if p.block == 0 or (op ~= OP_CONSUME and op ~= OP_PEEK) then return decide_state(key, op, cost, p) end
    local ending = block_end(key)
    if ending ~= nil and ending > now then
      -- Blocked: the state as it stands (a look), denied until the block's end or the state's own retry.
      local allowed, _, reset_at, retry_after = decide_state(key, OP_PEEK, cost, p)
      if allowed then retry_after = 0 end
      if retry_after < ending - now then retry_after = ending - now end
      if reset_at < ending then reset_at = ending end
      return false, 0, reset_at, retry_after, -1, REASON_BLOCKED
    end
    local allowed, remaining, reset_at, retry_after, delay, reason, write = decide_state(key, op, cost, p)
    if op ~= OP_CONSUME or allowed or reason ~= REASON_NONE then return allowed, remaining, reset_at, retry_after, delay, reason, write end
    ending = now + p.block
    call('SET', block_key(key), ending, 'PX', p.block + extra_ttl)
    if retry_after < p.block then retry_after = p.block end
    if reset_at < ending then reset_at = ending end
    return false, 0, reset_at, retry_after, -1, REASON_BLOCK_STARTED, write
  end
end
