-- One item of one user. ARGV: log_max, id. Returns {content, state} or false.
local u = inbox(0)
purge(u, now_ms(), tonumber(ARGV[1]))
local content = redis.call('HGET', u.items, ARGV[2])
if not content then return false end
return {content, redis.call('HGET', u.state, ARGV[2])}
