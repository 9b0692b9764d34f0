--[[
  shared-keys.lua: requests of one group that name the same key (one state named twice: one
  counter) are that counter counted once (docs/semantics.md, "Limits decided together"): each is
  decided with the largest of their costs, and the key is written at most once, by the first of
  them that records. The rule of src/store/shared-states.ts, by key name.

  shared_keys(keys, offset, size, cost_at) -> costs, firsts: for each position r (1..size) of the
  group, whose key is keys[offset + r], the cost to decide it with (the largest cost_at(r') of the
  positions naming its key) and the first position naming its key.
]]
local function shared_keys(keys, offset, size, cost_at)
  local first_of, largest, costs, firsts = {}, {}, {}, {}
  for r = 1, size do
    local key, cost = keys[offset + r], cost_at(r)
    if first_of[key] == nil then
      first_of[key] = r
      largest[key] = cost
    elseif cost > largest[key] then
      largest[key] = cost
    end
  end
  for r = 1, size do
    local key = keys[offset + r]
    costs[r], firsts[r] = largest[key], first_of[key]
  end
  return costs, firsts
end
