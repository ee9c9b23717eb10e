-- Shared by every inbox script (prepended by store/scripts.py).
-- One user's keys come in KEYS as 10 consecutive names (store/keys.py INBOX_FIELDS):
-- items, state, time, exp, cnt, seq, log, ck, prefs, pend.
-- A user's state string is "read_at_ms|seen|category|collapse_key" (read_at_ms 0 = unread),
-- then, only when the copy has any, "\31" and its flags: "a" archived, "p" pinned,
-- "s<ms>" snoozed until then, "v<mask>" the views it is in (below), "r<ms>" resurfaced then,
-- "c<k>@<ms>" its k-th action completed then, "h" it is a thread (below) (so an unflagged
-- state is what it always was; collapse keys hold no control characters).

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
  local st = {read_at = tonumber(string.sub(s, 1, a - 1)), seen = string.sub(s, a + 1, b - 1) == '1',
              category = string.sub(s, b + 1, c - 1), ck = string.sub(s, c + 1, f and f - 1 or -1),
              archived = false, pinned = false, snoozed = 0, views = 0, resurfaced = 0, done = '',
              thread = false}
  if f then  -- one pass over the flags: a letter, then its digits (and '@') if any
    for flag, value in string.gmatch(string.sub(s, f + 1), '(%a)([%d@]*)') do
      if flag == 'a' then st.archived = true
      elseif flag == 'p' then st.pinned = true
      elseif flag == 'h' then st.thread = true
      elseif flag == 's' then st.snoozed = tonumber(value)
      elseif flag == 'v' then st.views = tonumber(value)
      elseif flag == 'r' then st.resurfaced = tonumber(value)
      elseif flag == 'c' then st.done = value
      end
    end
  end
  return st
end

local function copy_state(st)
  return {read_at = st.read_at, seen = st.seen, category = st.category, ck = st.ck,
          archived = st.archived, pinned = st.pinned, snoozed = st.snoozed, views = st.views,
          resurfaced = st.resurfaced, done = st.done, thread = st.thread}
end

local function format_state(st)
  local s = st.read_at .. '|' .. (st.seen and '1' or '0') .. '|' .. st.category .. '|' .. st.ck
  local flags = (st.archived and 'a' or '') .. (st.pinned and 'p' or '') .. (st.thread and 'h' or '')
  if st.snoozed and st.snoozed > 0 then flags = flags .. 's' .. string.format('%d', st.snoozed) end
  if st.views and st.views > 0 then flags = flags .. 'v' .. string.format('%d', st.views) end
  if st.resurfaced and st.resurfaced > 0 then
    flags = flags .. 'r' .. string.format('%d', st.resurfaced)
  end
  if st.done and st.done ~= '' then flags = flags .. 'c' .. st.done end
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

-- Views (tabs): each user holds a copy of the view definitions that apply to them, the
-- tenant's then their own (cnt field `vdefs`, one line per view:
-- "name\tcategories\tseverity_min\ttags_any\ttags_all", lists comma-separated; views.lua
-- writes it), each copy's views as its state flag "v<mask>" (bit k-1: the k-th line,
-- fixed when the copy is stored or the definitions change), and the counters of every
-- view in cnt fields 'v<k>t', 'v<k>r', 'v<k>s' (below). So the same count_change that
-- moves the user's counts moves their views' in the same script.
local RANK = {info = 1, success = 2, warning = 3, error = 4, critical = 5}

local function split(list, sep)
  local out = {}
  for part in string.gmatch(list, '[^' .. sep .. ']+') do out[#out + 1] = part end
  return out
end

local function tag_set(list)
  local set = {}
  for tag in string.gmatch(list, '[^,]+') do set[tag] = true end
  return set
end

local parsed_defs = {}  -- per script run: the same definitions are parsed once
local function parse_defs(raw)
  local defs = parsed_defs[raw]
  if defs then return defs end
  defs = {}
  for line in string.gmatch(raw, '[^\n]+') do
    local f = {}
    for part in string.gmatch(line .. '\t', '([^\t]*)\t') do f[#f + 1] = part end
    defs[#defs + 1] = {name = f[1], cats = split(f[2], ','), sev = tonumber(f[3]) or 0,
                       any = split(f[4], ','), all = split(f[5], ',')}
  end
  parsed_defs[raw] = defs
  return defs
end

local user_defs = {}  -- per script run and user: their parsed definitions, or false
local function view_defs(u)
  local defs = user_defs[u.cnt]
  if defs == nil then
    local raw = redis.call('HGET', u.cnt, 'vdefs')
    defs = raw and raw ~= '' and parse_defs(raw) or false
    user_defs[u.cnt] = defs
  end
  return defs
end

-- What storing a copy and logging counts need of the user's views, read once per script
-- run: {names ('a;b', slot order), version (of the tenant's views), tenant_n (slots
-- holding the tenant's), personal (the lines of the user's own, as included), count} or
-- false.
-- A copy of a fan-out that knows the tenant's views at the user's version takes its
-- tenant slots' bits from the fan-out (one evaluation for every user) and evaluates only
-- the user's own views here, if any.
local user_views = {}
local function views_of(u)
  local v = user_views[u.cnt]
  if v == nil then
    local f = redis.call('HMGET', u.cnt, 'vnames', 'vt', 'vtn', 'vpx', 'vk')
    v = f[1] and {names = f[1], version = tonumber(f[2]) or -1, tenant_n = tonumber(f[3]) or 0,
                  personal = f[4] or '', count = tonumber(f[5]) or 0} or false
    user_views[u.cnt] = v
  end
  return v
end

-- One of the user's views by name, as `?view=` lists and read-all by view take it: its
-- bit in a copy's state mask (0: the user has no view of that name) and its definition
-- line (nil then).
local function named_view(u, name)
  local k = 0
  for line in string.gmatch(redis.call('HGET', u.cnt, 'vdefs') or '', '[^\n]+') do
    k = k + 1
    if string.match(line, '^[^\t]*') == name then return 2 ^ (k - 1), line end
  end
  return 0, nil
end

-- Whether a copy's state has the view of this bit (0: a view the user lacks: none has).
local function has_view(st, bit)
  return bit > 0 and math.floor(st.views / bit) % 2 == 1
end

-- The views (of `defs`) a copy with this category, severity rank and tag set is in.
local function view_mask(defs, category, severity, tags)
  local mask, bit = 0, 1
  for _, d in ipairs(defs) do
    local ok = severity >= d.sev
    if ok and #d.cats > 0 then
      ok = false
      for _, c in ipairs(d.cats) do if c == category then ok = true; break end end
    end
    if ok then for _, t in ipairs(d.all) do if not tags[t] then ok = false; break end end end
    if ok and #d.any > 0 then
      ok = false
      for _, t in ipairs(d.any) do if tags[t] then ok = true; break end end
    end
    if ok then mask = mask + bit end
    bit = bit * 2
  end
  return mask
end

-- A copy's views from its stored content (views.lua, and copies placed before views).
local function content_mask(defs, category, content)
  local n = cjson.decode(content)
  local tags = {}
  if type(n.tags) == 'table' then for _, tag in ipairs(n.tags) do tags[tag] = true end end
  return view_mask(defs, category, RANK[n.severity or 'info'] or 1, tags)
end

-- Every view's counters sit in cnt field 'v<k>' (the k-th view): "total,unread,unseen",
-- read with the user's own in one HMGET.
local COUNTER_FIELDS = {}
local function counter_fields(n)
  local f = COUNTER_FIELDS[n]
  if not f then
    f = {'unread', 'unseen', 'total'}
    for k = 1, n do f[#f + 1] = 'v' .. k end
    COUNTER_FIELDS[n] = f
  end
  return f
end

-- The user's counts; with `views`, each view's "total,unread,unseen" in slot order when
-- they have views.
local function counts(u)
  local v = views_of(u)
  local n = v and v.count or 0
  local c = redis.call('HMGET', u.cnt, unpack(counter_fields(n)))
  local out = {unread = tonumber(c[1]) or 0, unseen = tonumber(c[2]) or 0, total = tonumber(c[3]) or 0}
  if n > 0 then
    local views = {}
    for k = 1, n do views[k] = c[k + 3] or '0,0,0' end
    out.views = views
  end
  return out
end

-- The counts as a change entry carries them: with the user's views' names (`vn`: 'a;b')
-- and counters (`vc`: 't,r,s;t,r,s', slot order) when they have any.
local function logged_counts(u, c)
  local out = {unread = c.unread, unseen = c.unseen, total = c.total}
  local v = views_of(u)
  if v and c.views then
    out.vn = v.names
    out.vc = table.concat(c.views, ';')
  end
  return out
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
  local set = {'total', c.total, 'unread', c.unread, 'unseen', c.unseen}
  local m0, m1 = old and old.views or 0, new and new.views or 0
  if c.views and (m0 > 0 or m1 > 0) then  -- the views of either state move by the same vectors
    local views, bit, top = c.views, 1, math.max(m0, m1)
    local fields = counter_fields(#views)
    for k = 1, #views do
      if bit > top then break end
      local in0, in1 = math.floor(m0 / bit) % 2 == 1, math.floor(m1 / bit) % 2 == 1
      local dt = (in1 and t1 or 0) - (in0 and t0 or 0)
      local dr = (in1 and r1 or 0) - (in0 and r0 or 0)
      local ds = (in1 and s1 or 0) - (in0 and s0 or 0)
      if dt ~= 0 or dr ~= 0 or ds ~= 0 then
        local t, r, s = string.match(views[k], '(-?%d+),(-?%d+),(-?%d+)')
        views[k] = (t + dt) .. ',' .. (r + dr) .. ',' .. (s + ds)
        set[#set + 1], set[#set + 2] = fields[3 + k], views[k]
      end
      bit = bit * 2
    end
  end
  redis.call('HSET', u.cnt, unpack(set))
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
  entry.counts = logged_counts(u, c or counts(u))
  redis.call('ZADD', u.log, seq, cjson.encode(entry))
  if seq > log_max then redis.call('ZREMRANGEBYSCORE', u.log, '-inf', seq - log_max) end
  return seq
end

-- The time index orders copies by creation: its members are their ids (ULIDs), all
-- scored 0. A moved copy (resurfaced, a thread an activity joined, or a scheduled
-- notification's, which arrived after its id's time) sorts by when it moved (arrived)
-- instead: its member is then a sort key that starts like a ULID, the move's ms in
-- place of the id's, then the id's random part (as unique as the id), then the id's own
-- time (MOVED_LEN characters: the id is in it, so nothing maps the key back). Lists page
-- over members, and a cursor is a member's first ULID_LEN characters, so a moved copy
-- lists, pages and polls (`since`) as if new.
local CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
local ULID_LEN = 26
local MOVED_LEN = 36

local DIGITS = {string.byte(CROCKFORD, 1, 32)}
local ulid_times = {}  -- per script run: a fan-out moves every user's copy to the same ms

local function ulid_time(ms)
  local time = ulid_times[ms]
  if time then return time end
  -- unrolled, least significant digit first (no table, no unpack): a join encodes two
  local t, c10, c9, c8, c7, c6, c5, c4, c3, c2 = ms
  c10 = t % 32; t = (t - c10) / 32
  c9 = t % 32; t = (t - c9) / 32
  c8 = t % 32; t = (t - c8) / 32
  c7 = t % 32; t = (t - c7) / 32
  c6 = t % 32; t = (t - c6) / 32
  c5 = t % 32; t = (t - c5) / 32
  c4 = t % 32; t = (t - c4) / 32
  c3 = t % 32; t = (t - c3) / 32
  c2 = t % 32; t = (t - c2) / 32
  local d = DIGITS
  time = string.char(d[t % 32 + 1], d[c2 + 1], d[c3 + 1], d[c4 + 1], d[c5 + 1], d[c6 + 1],
                     d[c7 + 1], d[c8 + 1], d[c9 + 1], d[c10 + 1])
  ulid_times[ms] = time
  return time
end

local function sort_key(id, st)
  if st.resurfaced > 0 then
    return ulid_time(st.resurfaced) .. string.sub(id, 11) .. string.sub(id, 1, 10)
  end
  return id
end

-- The id of a time index member and its raw state (`raw`: the member's own, when read
-- already), or nil, nil when the copy is not there.
local function member_id(u, member, raw)
  if #member == MOVED_LEN then
    local id = string.sub(member, ULID_LEN + 1) .. string.sub(member, 11, ULID_LEN)
    raw = redis.call('HGET', u.state, id)
    if raw then return id, raw end
    return nil, nil
  end
  raw = raw or redis.call('HGET', u.state, member)
  if raw then return member, raw end
  return nil, nil
end

-- Move a copy in the time index from `old`'s place to `new`'s (states of the same id).
local function reindex(u, id, old, new)
  local before, after = sort_key(id, old), sort_key(id, new)
  if before == after then return end
  redis.call('ZREM', u.time, before)
  redis.call('ZADD', u.time, 0, after)
end

-- Threads. A copy with a thread key joins the user's open thread with that key instead
-- of adding an item. The thread item (flag "h") keeps the first copy's id; its content is
-- the latest activity's, prefixed with the thread's summary ({"thread":{id,key,count,
-- first_ms,last_ms,actors},...}: store/items.py unfolds it). An open thread's content is
-- made when it is read (`shown_content`), from the fields below: a join writes the
-- activity and the record, never the item (a fan-out joins every recipient's thread;
-- fewer of them read it). What is stored under the item's id is its content as it was
-- written last: when the thread began, and when it was retired (it is then final).
-- Beside it in `items`, under its key, so that one HMGET finds the open thread and all a
-- join changes:
--   "T:<key>" = "<id> <count> <first_ms> <last_ms> <expires_ms>\n<actors>\n", then one line
--     per actor, "<actor id>\t<actor JSON>\n" (the latest first, at most MAX_ACTORS
--     distinct); <actors> is their JSONs comma-separated, the summary's `actors` as it
--     shows them (rendered when they change, not at every join); expires_ms is the item's
--     expiry (its `exp` score, kept here too);
--   "I:<key>" = the latest MAX_ACTIVITIES activity ids, ULID_LEN characters each, oldest
--     first, no separator;
--   "a:<activity id>" = each of those activities' own content.
-- A copy created within the window of the thread's first activity joins it, unless it
-- expired. A thread whose window has passed while its item lives on is retired when a new
-- one takes its key: its activity ids move to "I:<its id>", and its id joins the key's
-- retired ones, "R:<key>" = "<id> <id> ..." (so a recall finds the thread of an activity
-- it names: lua/recall.lua). Kept as flat strings that C
-- string functions edit: a join touches no Lua table but the state's. `drop` removes
-- them with the item.
local MAX_ACTIVITIES = 100
local MAX_ACTORS = 10

local function parse_record(raw)
  local tid, count, first, last, expires, shown, actors =
    string.match(raw, '^(%S+) (%d+) (%d+) (%d+) (%d+)\n([^\n]*)\n(.*)$')
  return tid, tonumber(count), tonumber(first), tonumber(last), tonumber(expires), shown, actors
end

local function format_record(tid, count, first, last, expires, shown, actors)
  return string.format('%s %d %d %d %d\n%s\n', tid, count, first, last, expires, shown) .. actors
end

-- The JSONs of actor lines, comma-separated.
local function shown_actors(actors)
  local list = string.gsub(actors, '[^\t\n]*\t([^\n]*)\n', '%1,')
  return string.sub(list, 1, -2)
end

-- The record's actors (shown, and lines) with `line` ("<id>\t<JSON>") first: its older
-- line gone, at most MAX_ACTORS lines; as they were when it is first already.
local function with_actor(shown, actors, line)
  if string.find(actors, line, 1, true) == 1 and string.byte(actors, #line + 1) == 10 then
    return shown, actors  -- already the latest (compared in place: no string is made)
  end
  local body = '\n' .. actors
  local at = string.find(body, '\n' .. string.sub(line, 1, string.find(line, '\t', 1, true)), 1, true)
  if at then
    local stop = string.find(body, '\n', at + 1, true)
    body = string.sub(body, 1, at) .. string.sub(body, stop + 1)
  end
  local out, pos = line .. '\n' .. string.sub(body, 2), 0
  for _ = 1, MAX_ACTORS do
    pos = string.find(out, '\n', pos + 1, true)
    if not pos then return shown_actors(out), out end
  end
  out = string.sub(out, 1, pos)
  return shown_actors(out), out
end

-- The thread item's content: the summary, then the fields of the latest activity's
-- `content` (a JSON object).
local function thread_content(id, count, first, last, key, shown, content)
  return string.format('{"thread":{"id":"%s","key":"%s","count":%d,"first_ms":%d,' ..
    '"last_ms":%d,"actors":[%s]},', id, key, count, first, last, shown) .. string.sub(content, 2)
end

-- The activity ids of an "I:" field, oldest first.
local function activity_ids(ids)
  local out = {}
  for at = 1, #ids, ULID_LEN do out[#out + 1] = string.sub(ids, at, at + ULID_LEN - 1) end
  return out
end

-- The open thread item `id` (of this content) heads: its key, record and activity ids;
-- nil when it is no thread, or a retired one (its key's record names another item).
local function open_thread(u, id, content)
  local key = string.match(content or '', '^{"thread":{"id":"[^"]*","key":"([^"]*)"')
  if not key then return nil end
  local got = redis.call('HMGET', u.items, 'T:' .. key, 'I:' .. key)
  if got[1] and string.sub(got[1], 1, #id + 1) == id .. ' ' then return key, got[1], got[2] end
  return nil
end

-- Where thread item `id` (of this content) keeps its record and activity ids: its key's
-- fields while it is that key's open thread; else no record and "I:<id>" (retired).
local function thread_fields(u, id, content)
  local key = open_thread(u, id, content)
  if key then return 'T:' .. key, 'I:' .. key end
  return nil, 'I:' .. id
end

-- The content of item `id` as it shows now (nil when there is none): an open thread's
-- summary and latest activity; anything else's as stored.
local function shown_content(u, id)
  local content = redis.call('HGET', u.items, id)
  if not content or string.sub(content, 1, 11) ~= '{"thread":{' then return content end
  local key, record, ids = open_thread(u, id, content)
  if not (key and ids) then return content end  -- retired: its content is final
  local tid, count, first, last, _, shown = parse_record(record)
  local latest = redis.call('HGET', u.items, 'a:' .. string.sub(ids, -ULID_LEN))
  if not latest then return content end
  return thread_content(tid, count, first, last, key, shown, latest)
end

-- The key's retired threads ("R:<key>") without `id`.
local function unretire(u, key, id)
  local field = 'R:' .. key
  local retired = redis.call('HGET', u.items, field)
  if not retired then return end
  local at = string.find(retired, id .. ' ', 1, true)
  if not at then return end
  retired = string.sub(retired, 1, at - 1) .. string.sub(retired, at + #id + 1)
  if retired == '' then redis.call('HDEL', u.items, field) else
    redis.call('HSET', u.items, field, retired)
  end
end

local function drop_thread(u, id, content)
  local record, ids = thread_fields(u, id, content)
  local fields = {ids}
  for _, activity in ipairs(activity_ids(redis.call('HGET', u.items, ids) or '')) do
    fields[#fields + 1] = 'a:' .. activity
  end
  if record then fields[#fields + 1] = record else
    local key = string.match(content or '', '^{"thread":{"id":"[^"]*","key":"([^"]*)"')
    if key then unretire(u, key, id) end
  end
  redis.call('HDEL', u.items, unpack(fields))
end

-- Remove one item and its indexes; returns its state, or nil when it was not there.
-- `raw`: its raw state, when read already.
local function drop(u, id, raw)
  raw = raw or redis.call('HGET', u.state, id)
  if not raw then return nil end
  local st = parse_state(raw)
  if st.thread then drop_thread(u, id, redis.call('HGET', u.items, id)) end
  redis.call('HDEL', u.items, id)
  redis.call('HDEL', u.state, id)
  redis.call('ZREM', u.time, sort_key(id, st))
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

-- A full inbox drops its oldest notifications, each a delete change streams see (each
-- pass takes one member off the time index: a copy's, or a stale one). Returns their ids.
local function evict(u, cap, log_max)
  local ids = {}
  for _ = 1, redis.call('ZCARD', u.time) - cap do
    local oldest = redis.call('ZRANGE', u.time, 0, 0)[1]
    local id, raw = member_id(u, oldest)
    local st, c
    if id then st, c = drop(u, id, raw) end
    if not st then redis.call('ZREM', u.time, oldest) else
      append(u, {type = 'delete', id = id}, log_max, c)
      ids[#ids + 1] = id
    end
  end
  return ids
end

-- A notification as `copy` takes it: {id, content, category, ck, expires_ms, log_max,
-- critical, pull, cap (0: no cap), severity (rank), tags (a set), tver and tmask (the
-- version of the tenant's views the fan-out evaluated, and the copy's bits of them; nil:
-- unknown), thread ('' none), window_ms, created_ms, actor ('' none) and arrived_ms (0:
-- none)}; a threaded notification's content is its activity's own: `copy` puts the
-- thread's summary before it. `arrived_ms` is a scheduled notification's delivery, later
-- than its id's time (made at its acceptance): its copy is a moved one from the start,
-- sorted by it (`sort_key`), so a `since` poller that got past its id's time meanwhile
-- still gets it.
local function fresh_state(n)
  return {read_at = 0, seen = false, category = n.category, ck = n.ck,
          thread = (n.thread or '') ~= '', resurfaced = n.arrived_ms or 0}
end

-- Which of the user's views a copy of `n` is in (nil: the user has none).
local function copy_views(u, n)
  local v = views_of(u)
  if not v then return nil end
  local severity, tags = n.severity or 1, n.tags or {}
  if n.tver and n.tver == v.version then
    local mask = n.tmask
    if v.personal ~= '' then
      local own = view_mask(parse_defs(v.personal), n.category, severity, tags)
      mask = mask + own * 2 ^ v.tenant_n
    end
    return mask
  end
  -- every view evaluated here: once per distinct set of definitions
  local defs = view_defs(u) or {}
  n.masks = n.masks or {}
  local mask = n.masks[defs] or view_mask(defs, n.category, severity, tags)
  n.masks[defs] = mask
  return mask
end

-- The state of a thread that activity `n` (in `views`: `copy_views`'s answer) joins, from
-- `raw`, its state before: unread, unseen, moved to the activity's time, with the
-- activity's category (lists and views filter by what it shows) and views, no action
-- completed (the activity's are shown); archived, pinned, snoozed, its collapse key as
-- they were. Returns the old and new states (as `count_change` and `reindex` read them)
-- and the new one formatted. A thread that carries no flag but its own, its views and
-- when it last moved (the usual one) is read with one match: a fan-out joins every
-- recipient's thread, and `parse_state` cost it more than any command it sends.
local JOINED = '^(%d+)|([01])|[^|]*|([^\31]*)\31hv?(%d*)r?(%d*)$'

local function joined_state(raw, n, views)
  local read_at, seen, ck, mask, moved = string.match(raw, JOINED)
  local old, new
  if read_at then
    old = {read_at = tonumber(read_at), seen = seen == '1', archived = false, snoozed = 0,
           views = tonumber(mask) or 0, resurfaced = tonumber(moved) or 0}
    new = {read_at = 0, seen = false, archived = false, snoozed = 0, views = views or old.views,
           resurfaced = n.created_ms}
    local flags = new.views > 0 and string.format('hv%dr%d', new.views, n.created_ms)
      or string.format('hr%d', n.created_ms)
    return old, new, '0|0|' .. n.category .. '|' .. ck .. FLAGS .. flags
  end
  old = parse_state(raw)
  new = copy_state(old)
  new.read_at, new.seen, new.resurfaced = 0, false, n.created_ms
  new.category, new.done, new.views = n.category, '', views or old.views
  return old, new, format_state(new)
end

-- `n` (with a thread key, in `views`: `copy_views`'s answer) joins its open thread, whose
-- record is `record` (parsed) and activity ids `ids`, and whose item's state is `raw`: the
-- thread item is unread again, on top (it sorts by the activity's time), shows the
-- activity (its category and views are the activity's, its actions not yet completed),
-- counts it and its actor; one `update` entry (`thread`: streams send the whole item, so
-- it carries no state fields).
-- Returns as `copy` does.
local function join(u, n, views, raw, ids, tid, count, first, last, expires, shown, actors)
  if string.find(ids, n.id, 1, true) then return 0, 0 end  -- a retried fan-out
  count, last = count + 1, math.max(last, n.created_ms)
  ids = ids .. n.id
  if #ids > MAX_ACTIVITIES * ULID_LEN then
    redis.call('HDEL', u.items, 'a:' .. string.sub(ids, 1, ULID_LEN))
    ids = string.sub(ids, ULID_LEN + 1)
  end
  if n.actor ~= '' then shown, actors = with_actor(shown, actors, n.actor) end
  local later = n.expires_ms > expires
  if later then expires = n.expires_ms end
  redis.call('HSET', u.items, 'a:' .. n.id, n.content,
             'T:' .. n.thread, format_record(tid, count, first, last, expires, shown, actors),
             'I:' .. n.thread, ids)
  local old, new, state = joined_state(raw, n, views)
  redis.call('HSET', u.state, tid, state)
  reindex(u, tid, old, new)
  if later then redis.call('ZADD', u.exp, expires, tid) end
  local c = count_change(u, old, new)
  -- the event is the whole item as it then is (store/changes.py): the entry needs no state
  return append(u, {type = 'update', id = tid, thread = 1}, n.log_max, c), 0, c
end

-- Store one user's copy of `n`. Returns the new seq (0 when the user already has this
-- id, -1 when the user's preferences drop its category), how many oldest notifications
-- a full inbox dropped for it (each a later change), the counts right after the copy,
-- the id of the copy with its collapse key it replaced (nil: none) and the ids dropped.
local function copy(u, n)
  local keep, push = wishes(u.prefs, n.category, n.critical)
  if not keep then return -1, 0 end
  local fresh, state = fresh_state(n), n.state
  fresh.views = copy_views(u, n)
  if fresh.views and fresh.views > 0 then state = format_state(fresh) end
  local fields = {n.id, n.content}
  if n.thread ~= '' then
    local got = redis.call('HMGET', u.items, 'T:' .. n.thread, 'I:' .. n.thread)
    if got[1] then
      local tid, count, first, last, expires, shown, actors = parse_record(got[1])
      if tid == n.id then return 0, 0 end  -- a retried fan-out's first activity
      local raw = redis.call('HGET', u.state, tid)
      if raw and n.created_ms < first + n.window_ms and expires > n.created_ms then
        local ids = got[2] or ''
        return join(u, n, fresh.views, raw, ids, tid, count, first, last, expires, shown, actors)
      end
      if raw and got[2] then  -- its window passed: retired, its content final as it shows
        local content = shown_content(u, tid)
        if content then fields[#fields + 1], fields[#fields + 2] = tid, content end
        fields[#fields + 1], fields[#fields + 2] = 'I:' .. tid, got[2]
        local retired = redis.call('HGET', u.items, 'R:' .. n.thread) or ''
        fields[#fields + 1], fields[#fields + 2] = 'R:' .. n.thread, retired .. tid .. ' '
      end
    end
    -- a new thread: its item (the summary, then the activity), record and first activity
    local actors = n.actor ~= '' and n.actor .. '\n' or ''
    local shown, at = shown_actors(actors), n.created_ms
    fields[2] = thread_content(n.id, 1, at, at, n.thread, shown, n.content)
    fields[#fields + 1] = 'T:' .. n.thread
    fields[#fields + 1] = format_record(n.id, 1, at, at, n.expires_ms, shown, actors)
    fields[#fields + 1], fields[#fields + 2] = 'I:' .. n.thread, n.id
    fields[#fields + 1], fields[#fields + 2] = 'a:' .. n.id, n.content
  end
  if redis.call('HSETNX', u.state, n.id, state or format_state(fresh)) == 0 then return 0, 0 end
  local entry = {type = 'notification', id = n.id}
  if n.pull or not push then entry.quiet = 1 end
  if n.ck ~= '' then
    local old = redis.call('HGET', u.ck, n.ck)
    if old and drop(u, old) then entry.replaces = old end
    redis.call('HSET', u.ck, n.ck, n.id)
  end
  redis.call('HSET', u.items, unpack(fields))
  redis.call('ZADD', u.time, 0, sort_key(n.id, fresh))  -- a scheduled copy: by its arrival
  redis.call('ZADD', u.exp, n.expires_ms, n.id)
  local c = count_change(u, nil, fresh)
  local seq = append(u, entry, n.log_max, c)
  if n.cap > 0 then
    local ids = evict(u, n.cap, n.log_max)
    return seq, #ids, c, entry.replaces, ids
  end
  return seq, 0, c, entry.replaces
end

-- Copies a big fan-out left pending (defer.lua) become real ones, oldest first, before
-- anything reads or changes the inbox, so every read sees them as if placed at once;
-- those that expired meanwhile are skipped. An entry is "<header>\n<content>", the header
-- a JSON array [id, category, collapse_key, expires_ms, log_max, critical, pull, cap,
-- severity rank, tags (comma-separated), tenant views' version (-1: unknown), their mask,
-- thread key, window ms, created ms, actor line, arrived ms]
-- (the last nine absent in entries older than views, the last five in those older than
-- threads; the last one absent but for a scheduled notification's: the four before it
-- are then '', 0, 0, '' when it has no thread)
-- (store/inbox/placing.py place). `now` (ms) may be nil. Returns how many oldest notifications
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
        severity = h[9], tags = tag_set(h[10] or ''), tver = h[11] ~= -1 and h[11] or nil,
        tmask = h[12], thread = h[13] or '', window_ms = h[14], created_ms = h[15],
        actor = h[16] or '', arrived_ms = h[17] or 0, content = string.sub(raw, nl + 1)})
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
