-- The mover for one (set, topic): due ids -> ready, atomically (nothing popped and
-- lost, nothing pushed twice). Also re-offers reservations whose visibility expired.
-- KEYS: due, ready, reserved, state. ARGV: limit
-- Returns {oldest_due_age_ms or -1, backlog (still delayed), n_moved, moved ids..., reoffered ids...}.
local now, limit = now_ms(), tonumber(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
local moved, reoffered = {}, {}
for i = 1, #due, 2 do
  local id, due_ms = due[i], tonumber(due[i + 1])
  local raw = redis.call('HGET', KEYS[4], id)
  redis.call('ZREM', KEYS[1], id)
  if raw then
    local status, receipt, n = parse(raw)
    if status == 'delayed' then
      local priority = tonumber(redis.call('HGET', KEYS[4], id .. ':p') or '0')
      redis.call('ZADD', KEYS[2], (9 - priority) * 1e13 + due_ms, id)
      redis.call('HSET', KEYS[4], id, state('ready', receipt, n))
      moved[#moved + 1] = id
    end
  end
end
local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, limit)
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[3], id)
  local raw = redis.call('HGET', KEYS[4], id)
  if raw then
    local status, _, n = parse(raw)
    if status == 'reserved' then
      local priority = tonumber(redis.call('HGET', KEYS[4], id .. ':p') or '0')
      redis.call('ZADD', KEYS[2], (9 - priority) * 1e13 + now, id)
      redis.call('HSET', KEYS[4], id, state('ready', '', n))
      reoffered[#reoffered + 1] = id
    end
  end
end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local oldest = -1
if head[2] and tonumber(head[2]) <= now then oldest = now - tonumber(head[2]) end
local out = {oldest, redis.call('ZCARD', KEYS[1]), #moved}
for _, id in ipairs(moved) do out[#out + 1] = id end
for _, id in ipairs(reoffered) do out[#out + 1] = id end
return out
