--[[
  cross-slot.lua: a Redis Cluster master decides the requests of many hash slots it serves in one
  call (FCALL with numkeys 0, the function flagged allow-cross-slot-keys, cross-slot.ts). The
  decisions themselves are decide.lua's, unchanged: this file is only the gate in front of it,
  composed after the batch script, whose decide.lua runs as `decide_batch(KEYS, ARGV)`.

  ARGV: decide.lua's ARGV, then the K keys (decide.lua's KEYS), then the index in ARGV of
  decide.lua's group count, then K. decide.lua reads its arguments by position and never past its
  last group, so the arguments are handed to it as they are, and only the keys copied.

  A key of a slot this node does not serve right now fails the script at its first access, after
  the writes of the requests decided before it (Redis keeps them). So every group is checked first:
  its slot must be served here and stable. The probe reads a key name Tollgate never writes, in the
  group's slot (all keys of a group share one slot): on a slot owned elsewhere, being imported
  (no ASKING) or being migrated away (a missing key there is not local) it fails, through
  redis.pcall, so nothing is raised. A slot's state cannot change while a script runs, so a group
  that passes stays local to the end. Groups that fail are left out and named in the answer: the
  client decides them again through the per-slot path, which follows the redirections.

  Returns { decide.lua's answer for the groups decided (empty if none), the indexes of the groups
  left out }, or decide.lua's error reply as it is.
]]
local PROBE = '\0tollgate:slot-probe'

local function served_here(key)
  return type(redis.pcall('EXISTS', key .. PROBE)) == 'number'
end

-- decide.lua's KEYS and ARGV for the groups not left out: the policies as sent, then those groups.
local function without(keys, args, groups_at, left_out)
  local skip = {}
  for _, g in ipairs(left_out) do skip[g] = true end
  local some_keys, some_argv = {}, {}
  for i = 1, groups_at - 1 do some_argv[i] = args[i] end
  some_argv[groups_at] = tonumber(args[groups_at]) - #left_out
  local index, key_index = groups_at + 1, 0
  for g = 1, tonumber(args[groups_at]) do
    local size = tonumber(args[index])
    if not skip[g] then
      for i = index, index + 3 * size do some_argv[#some_argv + 1] = args[i] end
      for r = 1, size do some_keys[#some_keys + 1] = keys[key_index + r] end
    end
    index, key_index = index + 1 + 3 * size, key_index + size
  end
  return some_keys, some_argv
end

local function cross_slot(args)
  local n = #args
  local key_count, groups_at = tonumber(args[n]), tonumber(args[n - 1])
  if key_count == nil or groups_at == nil or n < 2 + key_count + groups_at then
    return redis.error_reply('ERR tollgate: cross-slot call arguments')
  end
  local keys = {}
  for i = 1, key_count do keys[i] = args[n - 2 - key_count + i] end
  -- Which groups run here: their first key's slot must be served by this node.
  local left_out = {}
  local group_count = tonumber(args[groups_at]) or 0
  local index, key_index = groups_at + 1, 0
  for g = 1, group_count do
    local size = tonumber(args[index]) or 0
    if not served_here(keys[key_index + 1] or '') then left_out[#left_out + 1] = g end
    index, key_index = index + 1 + 3 * size, key_index + size
  end
  if #left_out > 0 and #left_out == group_count then return { {}, left_out } end
  local out
  if #left_out == 0 then out = decide_batch(keys, args) else out = decide_batch(without(keys, args, groups_at, left_out)) end
  if out.err then return out end
  return { out, left_out }
end
