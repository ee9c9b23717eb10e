-- Announce a broadcast's notification before its copies are written (store/inbox/announcing.py
-- announce): streams send it at once, the copies' doorbells then bring their counts.
-- KEYS: 3 per user (state, cnt, seq; one slot on Cluster).
-- ARGV: the notification's id, the doorbell channel ('' on a Cluster), the message's
--       first line (`^<item JSON>`), then each user's `tenant/user`, in KEYS order.
-- Names each user who does not hold the id yet (a retried broadcast's earlier attempt
-- may have copied it) as `tenant/user seq-epoch`: the user's seq and its epoch now (''
-- none), which a stream must have sent exactly to take the announcement
-- (realtime/subscriber.py). With a channel, PUBLISHes the first line and those lines
-- and returns how many users it named; without, returns the lines (the caller publishes
-- them to the users' shard channels).
-- Codec: store/inbox/announcing.py Announcing.announce (layout tested by test_script_layouts.py).
local id, lines = ARGV[1], {ARGV[3]}
for o = 0, #KEYS - 1, 3 do
  if redis.call('HEXISTS', KEYS[o + 1], id) == 0 then
    local seq = redis.call('GET', KEYS[o + 3]) or '0'
    local epoch = redis.call('HGET', KEYS[o + 2], 'epoch') or ''
    lines[#lines + 1] = ARGV[4 + o / 3] .. ' ' .. seq .. '-' .. epoch
  end
end
if ARGV[2] == '' then
  table.remove(lines, 1)
  return lines
end
if #lines > 1 then redis.call('PUBLISH', ARGV[2], table.concat(lines, '\n')) end
return #lines - 1
