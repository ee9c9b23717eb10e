-- A thread's activities (the latest MAX_ACTIVITIES kept), oldest first. ARGV: log_max, id.
-- Returns false when the user has no such item; {} when it is no thread; else each kept
-- activity's content (lua/common.lua `join`).
-- Codec: store/inbox/reading.py Reading.activities; layout tested by test_script_layouts.py.
local u = inbox(0)
purge(u, now_ms(), tonumber(ARGV[1]))
local id = ARGV[2]
if not redis.call('HGET', u.state, id) then return false end
local _, field = thread_fields(u, id, redis.call('HGET', u.items, id))
local ids = redis.call('HGET', u.items, field)
if not ids then return {} end
local fields = {}
for i, activity in ipairs(activity_ids(ids)) do fields[i] = 'a:' .. activity end
local out = {}
for _, content in ipairs(redis.call('HMGET', u.items, unpack(fields))) do
  if content then out[#out + 1] = content end
end
return out
