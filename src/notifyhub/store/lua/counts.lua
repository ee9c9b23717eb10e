-- Counters of one user, exact at this instant. ARGV: log_max.
-- Returns {unread, unseen, total, seq, epoch}.
-- Codec: store/codecs.py LogMaxArgs -> Counted; layout tested by test_script_layouts.py.
local u = inbox(0)
purge(u, now_ms(), tonumber(ARGV[1]))
local c = counts(u)
return {c.unread, c.unseen, c.total, tonumber(redis.call('GET', u.seq) or '0'), epoch(u)}
