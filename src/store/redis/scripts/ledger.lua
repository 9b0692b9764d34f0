-- A usage ledger's write (redis/ledger.ts): one key's sums in one period's shard, atomically with
-- the ids that make a retry count once. Every key here shares the shard's hash tag (one slot).
-- KEYS: counts hash (key -> admitted; '' -> the latest retention end), refused hash, index
-- sorted set (every key of the shard, score 0, read in key order), this key's ids sorted set.
-- ARGV: key, admitted (1) or refused (0), cost, request id ('' none), most ids, now, retention end.
-- Returns 1 counted, 2 repeated (the id was billed already).
local key, admitted, cost, id = ARGV[1], ARGV[2] == '1', tonumber(ARGV[3]), ARGV[4]
local most, now, expires = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
if admitted then
  if id ~= '' then
    if redis.call('ZSCORE', KEYS[4], id) then return 2 end
    redis.call('ZADD', KEYS[4], now, id)
    -- Past the bound the oldest id is forgotten: a retry that late counts again.
    if redis.call('ZCARD', KEYS[4]) > most then redis.call('ZREMRANGEBYRANK', KEYS[4], 0, 0) end
    redis.call('PEXPIREAT', KEYS[4], expires)
  end
  redis.call('HINCRBY', KEYS[1], key, cost)
else
  redis.call('HINCRBY', KEYS[2], key, cost)
end
local kept = tonumber(redis.call('HGET', KEYS[1], '') or '0')
if expires > kept then
  redis.call('HSET', KEYS[1], '', expires)
  kept = expires
end
redis.call('ZADD', KEYS[3], 0, key)
redis.call('PEXPIREAT', KEYS[1], kept)
redis.call('PEXPIREAT', KEYS[3], kept)
if not admitted then redis.call('PEXPIREAT', KEYS[2], kept) end
return 1
