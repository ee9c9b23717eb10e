-- Counters of one user, exact at this instant. ARGV: log_max.
-- Returns {unread, unseen, total, seq, epoch, tenant views version, personal views
-- version (-1 each: never synced, views.lua), the views' names and counters
-- (lua/common.lua `logged_counts`; '' each without views)}.
-- Codec: store/codecs.py LogMaxArgs -> Counted; layout tested by test_script_layouts.py.
local u = inbox(0)
purge(u, now_ms(), tonumber(ARGV[1]))
local c = counts(u)
local v = redis.call('HMGET', u.cnt, 'vt', 'vp')
local logged = logged_counts(u, c)
return {c.unread, c.unseen, c.total, tonumber(redis.call('GET', u.seq) or '0'), epoch(u),
        tonumber(v[1]) or -1, tonumber(v[2]) or -1, logged.vn or '', logged.vc or ''}
