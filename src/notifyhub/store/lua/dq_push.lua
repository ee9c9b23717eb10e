-- KEYS: due, state, msg, queues. ARGV: id, message_json, due_ms, queue, priority, ttl_ms
-- (`queue`: the queue's key, from its (tenant, name), recorded as the id's `:q`)
-- Returns 1 when queued, 0 when the id already exists (an idempotent retry or restore).
local id = ARGV[1]
if redis.call('HEXISTS', KEYS[2], id) == 1 then return 0 end
redis.call('HSET', KEYS[3], id, ARGV[2])
redis.call('HSET', KEYS[2], id, state('delayed', '', 0), id .. ':p', ARGV[5], id .. ':t', ARGV[6],
  id .. ':q', ARGV[4])
redis.call('ZADD', KEYS[1], due_score(tonumber(ARGV[3]), tonumber(ARGV[5])), id)
redis.call('SADD', KEYS[4], ARGV[4])
return 1
