-- Shared by every inbox script (prepended by store/scripts.py).
-- One user's keys come in KEYS as 10 consecutive names (store/keys.py INBOX_FIELDS):
-- items, state, time, exp, cnt, seq, log, ck, prefs, pend.
-- A user's state string is "read_at_ms|seen|category|collapse_key" (read_at_ms 0 = unread),
-- then, only when the copy has any, "\31" and its flags: "a" archived, "p" pinned,
-- "s<ms>" snoozed until then (so an unflagged state is what it always was; collapse keys
-- hold no control characters).

local function inbox(o)
  return {items = KEYS[o + 1], state = KEYS[o + 2], time = KEYS[o + 3], exp = KEYS[o + 4],
          cnt = KEYS[o + 5], seq = KEYS[o + 6], log = KEYS[o + 7], ck = KEYS[o + 8],
          prefs = KEYS[o + 9], pend = KEYS[o + 10]}
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local FLAGS = '\31'

local function parse_state(s)
  local a = string.find(s, '|', 1, true)
  local b = string.find(s, '|', a + 1, true)
  local c = string.find(s, '|', b + 1, true)
  local f = string.find(s, FLAGS, c + 1, true)
  local flags = f and string.sub(s, f + 1) or ''
  return {read_at = tonumber(string.sub(s, 1, a - 1)), seen = string.sub(s, a + 1, b - 1) == '1',
          category = string.sub(s, b + 1, c - 1), ck = string.sub(s, c + 1, f and f - 1 or -1),
          archived = string.find(flags, 'a', 1, true) ~= nil,
          pinned = string.find(flags, 'p', 1, true) ~= nil,
          snoozed = tonumber(string.match(flags, 's(%d+)')) or 0}
end

local function format_state(st)
  local s = st.read_at .. '|' .. (st.seen and '1' or '0') .. '|' .. st.category .. '|' .. st.ck
  local flags = (st.archived and 'a' or '') .. (st.pinned and 'p' or '')
  if st.snoozed and st.snoozed > 0 then flags = flags .. 's' .. string.format('%d', st.snoozed) end
  if flags ~= '' then return s .. FLAGS .. flags end
  return s
end

-- Archived and snoozed copies are out of the default lists and every count.
local function hidden(st)
  return st.archived or (st.snoozed or 0) > 0
end

-- The user's pinned ids (cnt field `pins`, space-separated, at most the pin limit).
local function pins(u)
  local list = {}
  for id in string.gmatch(redis.call('HGET', u.cnt, 'pins') or '', '%S+') do list[#list + 1] = id end
  return list
end

local function set_pinned(u, id, on)
  local list = {}
  for _, pinned in ipairs(pins(u)) do
    if pinned ~= id then list[#list + 1] = pinned end
  end
  if on then list[#list + 1] = id end
  if #list == 0 then redis.call('HDEL', u.cnt, 'pins') else
    redis.call('HSET', u.cnt, 'pins', table.concat(list, ' '))
  end
end

local function counts(u)
  local c = redis.call('HMGET', u.cnt, 'unread', 'unseen', 'total')
  return {unread = tonumber(c[1]) or 0, unseen = tonumber(c[2]) or 0, total = tonumber(c[3]) or 0}
end

-- Adjust the counters by the difference between two states (nil = absent; an archived
-- copy counts as absent); returns the counts after the change.
local function vec(st)
  if not st or hidden(st) then return 0, 0, 0 end
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

-- The epoch of the user's seqs (cnt field `epoch`): made with seq 1, so a user whose data
-- Redis lost (FLUSHALL, a restart without persistence, a failover to an empty replica)
-- counts again from 1 under a new one, and a stream holding an older epoch's seq knows
-- (realtime/sse.py). Redis TIME in hex (seconds, then microseconds): unique per user.
-- '' for a seq that began before epochs existed.
local function epoch(u)
  return redis.call('HGET', u.cnt, 'epoch') or ''
end

local function new_epoch(u)
  local t = redis.call('TIME')
  redis.call('HSET', u.cnt, 'epoch', string.format('%x%05x', tonumber(t[1]), tonumber(t[2])))
end

-- Give a change the user's next seq and keep it in the bounded change log.
-- `c` are the counts after the change (from count_change), or nil to read them.
local function append(u, entry, log_max, c)
  local seq = redis.call('INCR', u.seq)
  if seq == 1 then new_epoch(u) end
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
  if st.pinned then set_pinned(u, id, false) end
  return st, count_change(u, st, nil)
end

-- A user's wishes for a category: keep it in the inbox? push it live?
local function wishes(prefs, category, critical)
  if category == '' then return true, true end
  local flags = redis.call('HGET', prefs, category)
  if not flags then return true, true end
  return string.sub(flags, 1, 1) == '1' or critical, string.sub(flags, 2, 2) == '1'
end

-- A full inbox drops its oldest notifications, each a delete change streams see.
local function evict(u, cap, log_max)
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

-- A notification as `copy` takes it: {id, content, category, ck, expires_ms, log_max,
-- critical, pull, cap (0: no cap)}.
local function fresh_state(n)
  return {read_at = 0, seen = false, category = n.category, ck = n.ck}
end

-- Store one user's copy of `n`. Returns the new seq (0 when the user already has this
-- id, -1 when the user's preferences drop its category), how many oldest notifications
-- a full inbox dropped for it (each a later change), and the counts right after the copy.
local function copy(u, n)
  local keep, push = wishes(u.prefs, n.category, n.critical)
  if not keep then return -1, 0 end
  local fresh = fresh_state(n)
  if redis.call('HSETNX', u.state, n.id, n.state or format_state(fresh)) == 0 then return 0, 0 end
  local entry = {type = 'notification', id = n.id}
  if n.pull or not push then entry.quiet = 1 end
  if n.ck ~= '' then
    local old = redis.call('HGET', u.ck, n.ck)
    if old and drop(u, old) then entry.replaces = old end
    redis.call('HSET', u.ck, n.ck, n.id)
  end
  redis.call('HSET', u.items, n.id, n.content)
  redis.call('ZADD', u.time, 0, n.id)
  redis.call('ZADD', u.exp, n.expires_ms, n.id)
  local c = count_change(u, nil, fresh)
  local seq = append(u, entry, n.log_max, c)
  if n.cap > 0 then return seq, evict(u, n.cap, n.log_max), c end
  return seq, 0, c
end

-- Copies a big fan-out left pending (defer.lua) become real ones, oldest first, before
-- anything reads or changes the inbox, so every read sees them as if placed at once;
-- those that expired meanwhile are skipped. An entry is "<header>\n<content>", the header
-- a JSON array [id, category, collapse_key, expires_ms, log_max, critical, pull, cap]
-- (store/inbox.py place). `now` (ms) may be nil. Returns how many oldest notifications
-- full inboxes dropped.
local function place_pending(u, now)
  local pending = redis.call('LRANGE', u.pend, 0, -1)
  if #pending == 0 then return 0 end
  now = now or now_ms()  -- asked only when something is pending
  redis.call('DEL', u.pend)
  local evicted = 0
  for _, raw in ipairs(pending) do
    local nl = string.find(raw, '\n', 1, true)
    local h = cjson.decode(string.sub(raw, 1, nl - 1))
    if h[4] > now then
      local _, e = copy(u, {id = h[1], category = h[2], ck = h[3], expires_ms = h[4],
        log_max = h[5], critical = h[6] == 1, pull = h[7] == 1, cap = h[8],
        content = string.sub(raw, nl + 1)})
      evicted = evicted + e
    end
  end
  return evicted
end

-- Expired items vanish, each as a delete change. Every read path calls this first,
-- so expiry is exact before the cleaner comes by; pending copies are placed before.
local function purge(u, now, log_max)
  place_pending(u, now)
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
