-- Forget finished messages for good: the retention sweep, once their PostgreSQL rows
-- are old enough (services/delayed.py `forget_finished`). KEYS: state, msg (one set).
-- ARGV: id1, queue1, id2, queue2, ... (`queue`: the key of the row's (tenant, name)).
-- Returns the ids Redis still holds unfinished in their queue: kept, never removed.
-- An id unknown in its queue (Redis lost it, or a pass before removed it) needs nothing.
local kept = {}
for i = 1, #ARGV, 2 do
  local id = ARGV[i]
  local raw = state_in(KEYS[1], id, ARGV[i + 1])
  if raw then
    local status = parse(raw)
    if status == 'consumed' or status == 'cancelled' then
      redis.call('HDEL', KEYS[1], id, id .. ':q', id .. ':p', id .. ':t')
      redis.call('HDEL', KEYS[2], id)
    else
      kept[#kept + 1] = id
    end
  end
end
return kept
