-- One item of one user. ARGV: log_max, id. Returns {content, state} or false.
-- Codec: store/codecs.py GetArgs -> Found; layout tested by test_script_layouts.py.
local u = inbox(0)
purge(u, now_ms(), tonumber(ARGV[1]))
local content = shown_content(u, ARGV[2])
if not content then return false end
return {content, redis.call('HGET', u.state, ARGV[2])}
