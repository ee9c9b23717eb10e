-- The cleaner's step for one user: drop expired items.
-- ARGV: log_max. Returns {seq, purged, next_expiry_ms or false}.
-- Codec: store/codecs.py LogMaxArgs -> Dropped; layout tested by test_script_layouts.py.
local u = inbox(0)
local purged = purge(u, now_ms(), tonumber(ARGV[1]))
return {tonumber(redis.call('GET', u.seq) or '0'), purged, next_expiry(u)}
