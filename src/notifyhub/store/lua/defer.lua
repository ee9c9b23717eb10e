-- Leave one notification pending for a batch of users: a big fan-out's write (store/inbox/
-- placing.py), one list push per user instead of a whole copy. The next script that touches
-- a user's inbox makes the copy (common.lua place_pending), so every read sees it as placed.
-- KEYS: per user its pend key, then its prefs key when the notification has a category
-- (same slot on Cluster). ARGV: entry ("<header>\n<content>", see place_pending), category,
-- critical ('1'/'').
-- Returns per user the length of its pending list (the caller places long ones), or -1
-- when the user's preferences drop the category; then 0, place.lua's eviction count
-- (a pending copy evicts when it places).
-- Codec: store/codecs.py CopyArgs.defer_args -> Deferred; layout tested by test_script_layouts.py.
local entry, category, critical = ARGV[1], ARGV[2], ARGV[3] == '1'
local stride = (category == '') and 1 or 2
local out = {}
for o = 1, #KEYS, stride do
  if stride == 2 and not wishes(KEYS[o + 1], category, critical) then
    out[#out + 1] = -1
  else
    out[#out + 1] = redis.call('RPUSH', KEYS[o], entry)
  end
end
out[#out + 1] = 0
return out
