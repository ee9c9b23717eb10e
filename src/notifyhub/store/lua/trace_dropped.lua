-- A batch of a deferred fan-out is placed (services/fanouts.py): its users whose
-- preferences dropped the notification (defer.lua's -1) get in the trace the outcome the
-- immediate path gives them, `dropped_by_preference`, instead of the `pending` their
-- publish wrote for everyone (store/traces/writer.py RoutingTraces.dropped).
-- KEYS: the trace. ARGV: how many of the batch's users were dropped, then per dropped
-- user their bucket's field (`b:<k>`) and id.
-- The meta's counts move from `pending` to `dropped_by_preference` by that many (a trace
-- counts the recipients it has no line for too); a user's line moves from
-- "<source>\tpending" to "<source>\tdropped_by_preference" where they have one. The meta
-- keeps its JSON text but for those two numbers (decoded and encoded again, cjson would
-- write its empty lists as {}): no other meta key ends in those names, and a string's
-- quote is escaped. A trace gone (expired) or not written is left alone.
-- Returns how many lines moved.
local key = KEYS[1]
local meta = redis.call('HGET', key, 'meta')
if not meta then return 0 end
local n = tonumber(ARGV[1])
local function bump(text, outcome, by)
  return (string.gsub(text, '"' .. outcome .. '":(%d+)', function(v)
    return '"' .. outcome .. '":' .. string.format('%d', math.max(0, tonumber(v) + by))
  end, 1))
end
meta = bump(bump(meta, 'pending', -n), 'dropped_by_preference', n)
redis.call('HSET', key, 'meta', meta)
local PENDING, DROPPED = '\tpending', '\tdropped_by_preference'
local buckets, moved = {}, 0
for i = 2, #ARGV, 2 do
  local field, user = ARGV[i], ARGV[i + 1]
  local bucket = buckets[field]
  if bucket == nil then
    local raw = redis.call('HGET', key, field)
    bucket = raw and cjson.decode(raw) or false
    buckets[field] = bucket
  end
  if bucket then
    for kind, users in pairs(bucket) do
      if users[user] ~= nil and string.sub(kind, -#PENDING) == PENDING then
        users[user] = nil
        if next(users) == nil then bucket[kind] = nil end
        local to = string.sub(kind, 1, -#PENDING - 1) .. DROPPED
        bucket[to] = bucket[to] or {}
        bucket[to][user] = 0
        moved = moved + 1
        break
      end
    end
  end
end
for field, bucket in pairs(buckets) do
  if bucket then redis.call('HSET', key, field, cjson.encode(bucket)) end
end
return moved
