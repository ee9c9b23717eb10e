-- A message's status. KEYS: state, due, due_v1. ARGV: id, queue. Returns the status, or
-- nil when the queue does not hold the id. A waiting ("delayed") message is ready once it
-- is in no due zset.
local raw = state_in(KEYS[1], ARGV[1], ARGV[2])
if not raw then return false end
local status = parse(raw)
if status == 'delayed'
  and not redis.call('ZSCORE', KEYS[2], ARGV[1])
  and not redis.call('ZSCORE', KEYS[3], ARGV[1]) then
  return 'ready'
end
return status
