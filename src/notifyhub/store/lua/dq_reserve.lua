-- Take up to `max` ready messages of one (set, queue) with a visibility deadline.
-- KEYS: ready, reserved, state, msg. ARGV: max, receipt_prefix, max_score
-- Returns {id1, message1, receipt1, score1, ...}. An id whose state is not waiting (it
-- cannot be, unless an older hub cancelled it mid-upgrade) is dropped, never offered.
local now, max = now_ms(), tonumber(ARGV[1])
local out = {}
local popped = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[3], 'WITHSCORES', 'LIMIT', 0, max)
for i = 1, #popped, 2 do
  local id = popped[i]
  redis.call('ZREM', KEYS[1], id)
  local raw = redis.call('HGET', KEYS[3], id)
  local message = redis.call('HGET', KEYS[4], id)
  local status, _, n
  if raw then status, _, n = parse(raw) end
  if message and status and waiting(status) then
    local receipt = ARGV[2] .. id .. '.' .. (n + 1)
    local ttl = tonumber(redis.call('HGET', KEYS[3], id .. ':t') or '30000')
    redis.call('ZADD', KEYS[2], now + ttl, id)
    redis.call('HSET', KEYS[3], id, state('reserved', receipt, n + 1))
    out[#out + 1] = id
    out[#out + 1] = message
    out[#out + 1] = receipt
    out[#out + 1] = popped[i + 1]
  end
end
return out
