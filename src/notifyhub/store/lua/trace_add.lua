-- KEYS: routing traces; ARGV[i]: JSON {user: count} for KEYS[i]. HINCRBY each `s:<user>`
-- of a trace that still exists (one expired since the flush read it is skipped: a trace
-- key is never made here). Returns how many counts were added.
local added = 0
for i, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 then
    for user, count in pairs(cjson.decode(ARGV[i])) do
      redis.call('HINCRBY', key, 's:' .. user, count)
      added = added + 1
    end
  end
end
return added
