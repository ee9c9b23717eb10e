-- Shared by every inbox script (prepended by store/scripts.py).
-- One user's keys come in KEYS as 9 consecutive names (store/keys.py INBOX_FIELDS):
-- items, state, time, exp, cnt, seq, log, ck, prefs.
-- A user's state string is "read_at_ms|seen|category|collapse_key" (read_at_ms 0 = unread).

local function inbox(o)
  return {items = KEYS[o + 1], state = KEYS[o + 2], time = KEYS[o + 3], exp = KEYS[o + 4],
          cnt = KEYS[o + 5], seq = KEYS[o + 6], log = KEYS[o + 7], ck = KEYS[o + 8],
          prefs = KEYS[o + 9]}
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function parse_state(s)
  local a = string.find(s, '|', 1, true)
  local b = string.find(s, '|', a + 1, true)
  local c = string.find(s, '|', b + 1, true)
  return {read_at = tonumber(string.sub(s, 1, a - 1)), seen = string.sub(s, a + 1, b - 1) == '1',
          category = string.sub(s, b + 1, c - 1), ck = string.sub(s, c + 1)}
end

local function format_state(st)
  return st.read_at .. '|' .. (st.seen and '1' or '0') .. '|' .. st.category .. '|' .. st.ck
end

local function counts(u)
  local c = redis.call('HMGET', u.cnt, 'unread', 'unseen', 'total')
  return {unread = tonumber(c[1]) or 0, unseen = tonumber(c[2]) or 0, total = tonumber(c[3]) or 0}
end

-- Adjust the counters by the difference between two states (nil = absent);
-- returns the counts after the change.
local function vec(st)
  if not st then return 0, 0, 0 end
  return 1, (st.read_at == 0) and 1 or 0, st.seen and 0 or 1
end

local function count_change(u, old, new)
  local t0, r0, s0 = vec(old)
  local t1, r1, s1 = vec(new)
  local c = counts(u)
  c.total, c.unread, c.unseen = c.total + t1 - t0, c.unread + r1 - r0, c.unseen + s1 - s0
  redis.call('HSET', u.cnt, 'total', c.total, 'unread', c.unread, 'unseen', c.unseen)
  return c
end

-- Give a change the user's next seq and keep it in the bounded change log.
-- `c` are the counts after the change (from count_change), or nil to read them.
local function append(u, entry, log_max, c)
  local seq = redis.call('INCR', u.seq)
  entry.seq = seq
  entry.counts = c or counts(u)
  redis.call('ZADD', u.log, seq, cjson.encode(entry))
  if seq > log_max then redis.call('ZREMRANGEBYSCORE', u.log, '-inf', seq - log_max) end
  return seq
end

-- Remove one item and its indexes; returns its state, or nil when it was not there.
local function drop(u, id)
  local raw = redis.call('HGET', u.state, id)
  if not raw then return nil end
  local st = parse_state(raw)
  redis.call('HDEL', u.items, id)
  redis.call('HDEL', u.state, id)
  redis.call('ZREM', u.time, id)
  redis.call('ZREM', u.exp, id)
  if st.ck ~= '' and redis.call('HGET', u.ck, st.ck) == id then redis.call('HDEL', u.ck, st.ck) end
  return st, count_change(u, st, nil)
end

-- Expired items vanish, each as a delete change. Every read path calls this first,
-- so expiry is exact before the cleaner comes by.
local function purge(u, now, log_max)
  local ids = redis.call('ZRANGEBYSCORE', u.exp, '-inf', now)
  for _, id in ipairs(ids) do
    local st, c = drop(u, id)
    if st then append(u, {type = 'delete', id = id}, log_max, c) end
  end
  return #ids
end

local function next_expiry(u)
  local head = redis.call('ZRANGE', u.exp, 0, 0, 'WITHSCORES')
  if head[2] then return head[2] end
  return false
end
