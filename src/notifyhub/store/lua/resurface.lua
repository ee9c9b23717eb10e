-- A snoozed item's time came: it is unread and unseen again, back in the lists (at the
-- top: it sorts by when it came back, lua/common.lua `sort_key`) and the counts, as a
-- `notification` change with `resurfaced` (streams send the whole item).
-- ARGV: log_max, id, until_ms (the snooze this wake-up was scheduled for: a later
-- snooze, an unsnooze or a delete since makes it a no-op).
-- Returns {seq} (0: nothing to do).
-- Codec: store/codecs.py ResurfaceArgs; layout tested by test_script_layouts.py.
local u = inbox(0)
local log_max, id, until_ms = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
purge(u, now_ms(), log_max)
local raw = redis.call('HGET', u.state, id)
if not raw then return {0} end
local old = parse_state(raw)
if old.snoozed == 0 or old.snoozed ~= until_ms then return {0} end
local new = copy_state(old)
new.snoozed, new.read_at, new.seen, new.resurfaced = 0, 0, false, now_ms()
redis.call('HSET', u.state, id, format_state(new))
reindex(u, id, old, new)  -- at the top of the lists: it sorts by when it came back
local c = count_change(u, old, new)
return {append(u, {type = 'notification', id = id, resurfaced = 1}, log_max, c)}
