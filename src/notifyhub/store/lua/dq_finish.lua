-- Ack (consume), cancel or drop one message. KEYS: due, ready, reserved, state, msg.
-- ARGV: action ('ack' | 'cancel' | 'drop'), id, receipt (ack only), queue
-- A drop removes a waiting message whole, state included, as if never queued (a message
-- made moot before its time whose row goes too: a snooze's wake-up whose snooze changed).
-- Returns 1 done, 0 wrong state (409), -1 unknown id in this queue (404), -2 stale receipt.
-- A finished message keeps only its state and queue (what a second ack or cancel, a
-- status read and a restore's push ask about): its body (up to 64 KiB), priority and
-- ttl go, as nothing reads them again. Kept, every snooze's and scheduled notification's
-- message stayed in Redis whole for good.
local action, id = ARGV[1], ARGV[2]
local raw = state_in(KEYS[4], id, ARGV[4])
if not raw then return -1 end
local status, receipt, n = parse(raw)
if action == 'ack' then
  if status ~= 'reserved' then return 0 end
  if receipt ~= ARGV[3] then return -2 end
  redis.call('ZREM', KEYS[3], id)
  redis.call('HSET', KEYS[4], id, state('consumed', '', n))
  redis.call('HDEL', KEYS[4], id .. ':p', id .. ':t')
  redis.call('HDEL', KEYS[5], id)
  return 1
end
if not waiting(status) then return 0 end
-- Leaves the due zset and the state in one step: the mover, which reads no state, can
-- never take a cancelled id (a layout 1 due entry is checked when it is converted).
redis.call('ZREM', KEYS[1], id)
redis.call('ZREM', KEYS[2], id)
if action == 'drop' then
  redis.call('HDEL', KEYS[4], id, id .. ':p', id .. ':t', id .. ':q')
else
  redis.call('HSET', KEYS[4], id, state('cancelled', '', n))
  redis.call('HDEL', KEYS[4], id .. ':p', id .. ':t')
end
redis.call('HDEL', KEYS[5], id)
return 1
