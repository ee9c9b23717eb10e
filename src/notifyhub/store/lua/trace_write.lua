-- Routing traces written behind their publishes (store/traces/writer.py
-- RoutingTraces.flush). KEYS: the traces; ARGV[1]: their TTL (s); then, trace after
-- trace, how many fields it has and its fields and values. Returns how many traces
-- were written.
local at = 2
for _, key in ipairs(KEYS) do
  local last = at + 2 * tonumber(ARGV[at])
  redis.call('HSET', key, unpack(ARGV, at + 1, last))
  redis.call('EXPIRE', key, ARGV[1])
  at = last + 1
end
return #KEYS
