-- Announce a broadcast's notification before its copies are written (store/inbox/announcing.py
-- announce): streams send it at once, the copies' doorbells then bring their counts.
-- KEYS: 3 per user (state, cnt, seq; one slot on Cluster).
-- ARGV: the notification's id, '1' to publish ('' on a Cluster), the messages' first
--       line (`^<item JSON>`), then each user's `tenant/user`, in KEYS order, then (when
--       publishing) each user's doorbell channel (store/doorbells.py `channels_of`).
-- Names each user who does not hold the id yet (a retried broadcast's earlier attempt
-- may have copied it) as `tenant/user seq-epoch`: the user's seq and its epoch now (''
-- none), which a stream must have sent exactly to take the announcement
-- (realtime/subscriber.py). Publishing, PUBLISHes the first line and those lines, one
-- message per channel, and returns how many users it named; else returns the lines (the
-- caller publishes them to the users' shard channels).
-- Codec: store/inbox/announcing.py Announcing.announce (layout tested by test_script_layouts.py).
local id, users, named, lines = ARGV[1], #KEYS / 3, {}, {}
for o = 0, #KEYS - 1, 3 do
  if redis.call('HEXISTS', KEYS[o + 1], id) == 0 then
    local seq = redis.call('GET', KEYS[o + 3]) or '0'
    local epoch = redis.call('HGET', KEYS[o + 2], 'epoch') or ''
    named[#named + 1] = o / 3
    lines[#lines + 1] = ARGV[4 + o / 3] .. ' ' .. seq .. '-' .. epoch
  end
end
if ARGV[2] ~= '1' then return lines end
local by_channel, order = {}, {}
for i, user in ipairs(named) do
  local channel = ARGV[4 + users + user]
  local message = by_channel[channel]
  if not message then
    message = {ARGV[3]}
    by_channel[channel] = message
    order[#order + 1] = channel
  end
  message[#message + 1] = lines[i]
end
for _, channel in ipairs(order) do
  redis.call('PUBLISH', channel, table.concat(by_channel[channel], '\n'))
end
return #lines
