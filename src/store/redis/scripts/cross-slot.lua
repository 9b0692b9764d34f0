--[[
  cross-slot.lua: a Redis Cluster master decides the requests of many hash slots it serves in one
  call (FCALL with numkeys 0, the function flagged allow-cross-slot-keys, cross-slot.ts). The
  decisions themselves are decide.lua's, unchanged: this file is only the gate in front of it,
  composed after the batch script, whose decide.lua runs as `decide_batch(KEYS, ARGV)`.

  ARGV[1]  K, the number of keys; ARGV[2] the index, in decide.lua's arguments, of its group count;
  then the K keys (decide.lua's KEYS), then decide.lua's ARGV.

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

local function cross_slot(args)
  local key_count, groups_at = tonumber(args[1]), tonumber(args[2])
  if key_count == nil or groups_at == nil or #args < 2 + key_count + groups_at then
    return redis.error_reply('ERR tollgate: cross-slot call arguments')
  end
  local keys, argv = {}, {}
  for i = 1, key_count do keys[i] = args[2 + i] end
  for i = 3 + key_count, #args do argv[#argv + 1] = args[i] end
  -- Which groups run here: their first key's slot must be served by this node.
  local left_out, kept = {}, {}
  local index, key_index = groups_at + 1, 0
  for g = 1, tonumber(argv[groups_at]) or 0 do
    local size = tonumber(argv[index]) or 0
    if served_here(keys[key_index + 1] or '') then kept[#kept + 1] = { index, key_index, size } else left_out[#left_out + 1] = g end
    index, key_index = index + 1 + 3 * size, key_index + size
  end
  if #left_out == 0 then
    local out = decide_batch(keys, argv)
    if out.err then return out end
    return { out, left_out }
  end
  if #kept == 0 then return { {}, left_out } end
  -- decide.lua's arguments for the kept groups only: the policies as sent, then the kept groups.
  local some_keys, some_argv = {}, {}
  for i = 1, groups_at - 1 do some_argv[i] = argv[i] end
  some_argv[groups_at] = #kept
  for _, group in ipairs(kept) do
    local at, first, size = group[1], group[2], group[3]
    for i = at, at + 3 * size do some_argv[#some_argv + 1] = argv[i] end
    for r = 1, size do some_keys[#some_keys + 1] = keys[first + r] end
  end
  local out = decide_batch(some_keys, some_argv)
  if out.err then return out end
  return { out, left_out }
end
