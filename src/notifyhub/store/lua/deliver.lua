-- Deliver one notification to a batch of users (KEYS: 8 per user, same slot on Cluster).
-- ARGV: id, content_json, category, collapse_key, expires_ms, log_max
-- Returns one seq per user: 0 when that user already has this id (a retried fan-out).
local id, content, category, ck = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local expires_ms, log_max = tonumber(ARGV[5]), tonumber(ARGV[6])
local fresh = {read_at = 0, seen = false, category = category, ck = ck}
local fresh_state = format_state(fresh)
local out = {}
for o = 0, #KEYS - 1, 8 do
  local u = inbox(o)
  if redis.call('HEXISTS', u.state, id) == 1 then
    out[#out + 1] = 0
  else
    local entry = {type = 'notification', id = id}
    if ck ~= '' then
      local old = redis.call('HGET', u.ck, ck)
      if old and drop(u, old) then entry.replaces = old end
      redis.call('HSET', u.ck, ck, id)
    end
    redis.call('HSET', u.items, id, content)
    redis.call('HSET', u.state, id, fresh_state)
    redis.call('ZADD', u.time, 0, id)
    redis.call('ZADD', u.exp, expires_ms, id)
    out[#out + 1] = append(u, entry, log_max, count_change(u, nil, fresh))
  end
end
return out
