-- One (set, queue)'s counts, read only. KEYS: due, ready, reserved, due_v1.
-- Returns {delayed, ready, in_flight, oldest_due_ms or -1, now_ms}: oldest_due_ms is the
-- earliest due time of a message a consumer could take now (ready, or due but not yet
-- moved by the mover). Ready scores order by priority first, so the oldest is the
-- earliest of each priority band's head: ten ZRANGEBYSCORE ... LIMIT 0 1 calls.
local now = now_ms()
local oldest = -1
local function older(due_ms)
  if due_ms <= now and (oldest < 0 or due_ms < oldest) then oldest = due_ms end
end
for band = 0, 9 do
  local head = redis.call('ZRANGEBYSCORE', KEYS[2], band * 1e13, '(' .. (band + 1) * 1e13,
    'WITHSCORES', 'LIMIT', 0, 1)
  if #head > 0 then older(tonumber(head[2]) - band * 1e13) end
end
local waiting = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #waiting > 0 then older(math.floor(tonumber(waiting[2]) / 10)) end
local v1 = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
if #v1 > 0 then older(tonumber(v1[2])) end
local delayed = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[4])
return {delayed, redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]), oldest, now}
