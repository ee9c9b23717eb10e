-- Deliver one notification to a batch of users (KEYS: 9 per user, same slot on Cluster).
-- ARGV: id, content_json, category, collapse_key, expires_ms, log_max, critical ('1'/''),
--       pull ('1': store, but no live notification event), items_per_user (0: no cap)
-- Returns one value per user: the new seq; 0 when that user already has this id (a
-- retried fan-out); -1 when the user's preferences drop this category (inbox: false);
-- then one more value: how many oldest notifications full inboxes dropped.
local id, content, category, ck = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local expires_ms, log_max = tonumber(ARGV[5]), tonumber(ARGV[6])
local critical, pull = ARGV[7] == '1', ARGV[8] == '1'
local cap = tonumber(ARGV[9])
local fresh = {read_at = 0, seen = false, category = category, ck = ck}
local fresh_state = format_state(fresh)

-- A user's wishes for this category: keep it? push it live?
local function wishes(u)
  if category == '' then return true, true end
  local flags = redis.call('HGET', u.prefs, category)
  if not flags then return true, true end
  return string.sub(flags, 1, 1) == '1' or critical, string.sub(flags, 2, 2) == '1'
end

-- A full inbox drops its oldest notifications, each a delete change streams see.
local function evict(u)
  local evicted = 0
  while redis.call('ZCARD', u.time) > cap do
    local oldest = redis.call('ZRANGE', u.time, 0, 0)[1]
    local st, c = drop(u, oldest)
    if not st then redis.call('ZREM', u.time, oldest) else
      append(u, {type = 'delete', id = oldest}, log_max, c)
      evicted = evicted + 1
    end
  end
  return evicted
end

local out, evicted = {}, 0
for o = 0, #KEYS - 1, 9 do
  local u = inbox(o)
  local keep, push = wishes(u)
  if not keep then
    out[#out + 1] = -1
  elseif redis.call('HEXISTS', u.state, id) == 1 then
    out[#out + 1] = 0
  else
    local entry = {type = 'notification', id = id}
    if pull or not push then entry.quiet = 1 end
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
    if cap > 0 then evicted = evicted + evict(u) end
  end
end
out[#out + 1] = evicted
return out
