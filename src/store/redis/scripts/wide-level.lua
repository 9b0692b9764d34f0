--[[
  wide-level.lua: the level algorithms' wide arithmetic (src/algorithms/wide-level.ts, the same
  steps; docs/semantics.md "Wide policies"). The bucket is the time it is empty,
  TAT = tat_ms + tat_r / limit; spans are (ms, r) with 0 <= r < limit; products use mul_divmod.
  Returns the values of level.lua; the state written is the new TAT's remainder (its end, ceil(TAT),
  is reset_at), for gcra and the buckets alike.
]]

local function span_at_most(am, ar, bm, br)
  return am < bm or (am == bm and ar <= br)
end

local function span_ceil(ms, r)
  if r > 0 then return ms + 1 end
  return ms
end

-- Whole requests the bucket has room for with (am, ar) queued out of the full (fm, fr).
local function wide_room(fm, fr, am, ar, p)
  if span_at_most(fm, fr, am, ar) then return 0 end
  local dm, dr = fm - am, fr - ar
  if dr < 0 then
    dm = dm - 1
    dr = dr + p.limit
  end
  local q, r = mul_divmod(dm, p.limit, p.window)
  return q + floor_div(r + dr, p.window)
end

local function decide_wide_level(tat_ms, tat_r, now, cost, p, shaping)
  local window, limit, capacity = p.window, p.limit, p.capacity
  if tat_r >= limit then
    local carry = floor_div(tat_r, limit)
    tat_ms = tat_ms + carry
    tat_r = tat_r - carry * limit
  end
  local am, ar = 0, 0
  if tat_ms >= now then am, ar = tat_ms - now, tat_r end
  local fm, fr = mul_divmod(capacity, window, limit)
  local no_delay = -1
  if shaping then no_delay = 0 end
  if cost > capacity then
    return false, wide_room(fm, fr, am, ar, p), now + span_ceil(am, ar), window, no_delay, REASON_COST_EXCEEDS_CAPACITY
  end
  local cm, cr = mul_divmod(cost, window, limit)
  local nm, nr = am + cm, ar + cr
  if nr >= limit then
    nm = nm + 1
    nr = nr - limit
  end
  if not span_at_most(nm, nr, fm, fr) then
    local om, o_r = nm - fm, nr - fr
    if o_r < 0 then
      om = om - 1
      o_r = o_r + limit
    end
    return false, wide_room(fm, fr, am, ar, p), now + span_ceil(am, ar), span_ceil(om, o_r), no_delay, REASON_NONE
  end
  local delay = -1
  if shaping then delay = span_ceil(am, ar) end
  return true, wide_room(fm, fr, nm, nr, p), now + span_ceil(nm, nr), 0, delay, REASON_NONE, nr
end
