-- Leave one notification pending for a batch of users: a big fan-out's write (store/inbox/
-- placing.py), one list push per user instead of a whole copy. The next script that touches
-- a user's inbox makes the copy (common.lua place_pending), so every read sees it as placed.
-- KEYS: per user its pend key, then its prefs key when the notification has a category
-- (same slot on Cluster); on one Redis, for a batch of a fan-out placed after its 202, its
-- placement record last (store/fanouts.py). ARGV: entry ("<header>\n<content>", see
-- place_pending), category, critical ('1'/''); with the record: the holder's token, the
-- recipient index's cursor the batch starts at and the one it ends at, the lease (ms).
-- A batch whose record another holder took, moved on or let go (a recall) writes nothing:
-- an error reply 'NOTHELD'. Else the record moves to the end cursor, counts the batch's
-- users and renews the lease, in the same step as the pushes (nothing placed twice or lost
-- when a holder dies).
-- Returns per user the length of its pending list (the caller places long ones), or -1
-- when the user's preferences drop the category; then 0, place.lua's eviction count
-- (a pending copy evicts when it places).
-- Codec: store/codecs.py CopyArgs.defer_args -> Deferred; layout tested by test_script_layouts.py.
local entry, category, critical = ARGV[1], ARGV[2], ARGV[3] == '1'
local stride = (category == '') and 1 or 2
local users_end = #KEYS
local record = nil
if ARGV[4] then
  record = KEYS[#KEYS]
  users_end = #KEYS - 1
  local held = redis.call('HMGET', record, 'token', 'cursor')
  if held[1] ~= ARGV[4] or held[2] ~= ARGV[5] then
    return redis.error_reply('NOTHELD the fan-out was taken over, moved on or recalled')
  end
end
local out = {}
for o = 1, users_end, stride do
  if stride == 2 and not wishes(KEYS[o + 1], category, critical) then
    out[#out + 1] = -1
  else
    out[#out + 1] = redis.call('RPUSH', KEYS[o], entry)
  end
end
if record then
  redis.call('HSET', record, 'cursor', ARGV[6], 'lease', now_ms() + tonumber(ARGV[7]))
  redis.call('HINCRBY', record, 'placed', #out)
end
out[#out + 1] = 0
return out
