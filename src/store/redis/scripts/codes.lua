--[[
  codes.lua: the numbers of the wire format (store/redis/protocol.ts), shared by both drivers:
  decide.lua (a batch) and single.lua (a decision alone in its call).
]]
local TOKEN_BUCKET, LEAKY_BUCKET, FIXED_WINDOW, SLIDING_LOG, SLIDING_WINDOW, GCRA = 1, 2, 3, 4, 5, 6
local OP_CONSUME, OP_PEEK, OP_RESET, OP_ADD = 1, 2, 3, 4

local MAX_INTEGER = 9007199254740991
