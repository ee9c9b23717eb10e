-- Recall notification `id` from one user's inbox. An item of its own goes (a `delete`
-- entry). An activity of a thread leaves it: the thread item then shows the activity
-- before it (content, category, views, completion, and its place in lists when the
-- recalled one had moved it), counts one fewer and keeps only the actors its kept
-- activities have (an `update` entry: streams send the whole item); with its last
-- activity the thread item goes (a `delete` entry). The thread item keeps its id, the
-- first activity's, even when that one is recalled.
-- ARGV: log_max, id. Returns {seq, changed (0 or 1), next_expiry_ms or false}.
-- Codec: store/codecs.py RemoveArgs -> Dropped; layout tested by test_script_layouts.py.
local u = inbox(0)
local log_max, id = tonumber(ARGV[1]), ARGV[2]
purge(u, now_ms(), log_max)

-- A ULID's time (ms): an activity's id says when it was created.
local function ulid_ms(ulid)
  local ms = 0
  for i = 1, 10 do
    ms = ms * 32 + string.find(CROCKFORD, string.sub(ulid, i, i), 1, true) - 1
  end
  return ms
end

-- Where `activity` starts among a thread's ids (ULID_LEN apart), or nil.
local function position(ids, activity)
  local at = string.find(ids, activity, 1, true)
  while at and (at - 1) % ULID_LEN ~= 0 do at = string.find(ids, activity, at + 1, true) end
  return at
end

local function text(value)  -- a JSON string, or '' (absent, null)
  return type(value) == 'string' and value or ''
end

local function key_of(content)
  return string.match(content or '', '^{"thread":{"id":"[^"]*","key":"([^"]*)"')
end

-- The thread item holding activity `id` (of this content) after its first: its id, its
-- record field (nil: retired) and its ids field; nil when none does.
local function holder(content)
  local key = text(cjson.decode(content).thread_key)
  if key == '' then return nil end
  local got = redis.call('HMGET', u.items, 'T:' .. key, 'I:' .. key, 'R:' .. key)
  if got[1] and got[2] and position(got[2], id) then
    return string.match(got[1], '^%S+'), 'T:' .. key, 'I:' .. key
  end
  for tid in string.gmatch(got[3] or '', '%S+') do
    local ids = redis.call('HGET', u.items, 'I:' .. tid)
    if ids and position(ids, id) then return tid, nil, 'I:' .. tid end
  end
  return nil
end

-- The thread's count, first and last ms, expiry and actor lines: from its record while
-- open, else from its final content (expiry unused: a retired thread has no record).
local function summary(tid, record_field)
  if record_field then
    local _, count, first, last, expires, _, actors =
      parse_record(redis.call('HGET', u.items, record_field))
    return count, first, last, expires, actors
  end
  local s = cjson.decode(redis.call('HGET', u.items, tid)).thread
  local lines = {}
  for _, actor in ipairs(s.actors) do
    lines[#lines + 1] = text(actor.id) .. '\t' .. cjson.encode(actor) .. '\n'
  end
  return s.count, s.first_ms, s.last_ms, 0, table.concat(lines)
end

local function actor_of(content)
  local actor = content and cjson.decode(content).actor
  if type(actor) == 'table' then return actor end
  return nil
end

-- The actors of the kept activities (`contents`, oldest first): the latest first, each
-- once; then those of older activities no longer kept (`lines`' others), but `gone` (the
-- recalled activity's actor); at most MAX_ACTORS. Returns them shown, and as lines.
local function regather(lines, contents, gone)
  local known = {}
  for line in string.gmatch(lines, '[^\n]+') do known[string.match(line, '^[^\t]*')] = line end
  local out, seen = {}, {}
  for i = #contents, 1, -1 do
    local actor = actor_of(contents[i])
    local aid = actor and text(actor.id)
    if aid and not seen[aid] then
      seen[aid] = true
      out[#out + 1] = known[aid] or (aid .. '\t' .. cjson.encode(actor))
    end
  end
  for line in string.gmatch(lines, '[^\n]+') do
    local aid = string.match(line, '^[^\t]*')
    if not seen[aid] and aid ~= gone then
      seen[aid] = true
      out[#out + 1] = line
    end
  end
  while #out > MAX_ACTORS do table.remove(out) end
  local actors = #out > 0 and table.concat(out, '\n') .. '\n' or ''
  return shown_actors(actors), actors
end

-- The state of thread item `old_tid` once it shows activity `latest_id` (content `latest`)
-- again.
local function fallen_back(old, old_tid, latest_id, latest)
  local new = copy_state(old)
  new.category, new.done = text(cjson.decode(latest).category), ''
  local defs = view_defs(u)
  new.views = defs and content_mask(defs, new.category, latest) or 0
  if old.resurfaced == ulid_ms(id) then  -- the recalled activity had moved it: back
    new.resurfaced = latest_id == old_tid and 0 or ulid_ms(latest_id)
  end
  return new
end

local function contents_of(list)
  local fields = {}
  for i, activity in ipairs(list) do fields[i] = 'a:' .. activity end
  local out = {}
  for _, content in ipairs(redis.call('HMGET', u.items, unpack(fields))) do
    if content then out[#out + 1] = content end
  end
  return out
end

-- Take activity `id` (at `at` in `ids`) out of thread `tid` (state `raw`); returns the seq.
local function withdraw(raw, tid, record_field, ids_field, ids, at)
  local rest = string.sub(ids, 1, at - 1) .. string.sub(ids, at + ULID_LEN)
  local list = rest ~= '' and activity_ids(rest) or {}
  local contents = #list > 0 and contents_of(list) or {}
  if #contents == 0 then  -- its last activity: the thread goes
    local _, c = drop(u, tid, raw)
    return append(u, {type = 'delete', id = tid}, log_max, c)
  end
  local latest_id, latest = list[#list], contents[#contents]
  local was_latest = at + ULID_LEN > #ids
  local count, first, last, expires, lines = summary(tid, record_field)
  count = math.max(count - 1, #list)
  if at == 1 and count == #list then first = ulid_ms(list[1]) end
  if was_latest then last = ulid_ms(latest_id) end
  local gone = actor_of(redis.call('HGET', u.items, 'a:' .. id))
  local shown, actors = regather(lines, contents, gone and text(gone.id))
  local key = key_of(redis.call('HGET', u.items, tid))
  local fields = {tid, thread_content(tid, count, first, last, key, shown, latest), ids_field, rest}
  if record_field then
    fields[#fields + 1] = record_field
    fields[#fields + 1] = format_record(tid, count, first, last, expires, shown, actors)
  end
  redis.call('HDEL', u.items, 'a:' .. id)
  redis.call('HSET', u.items, unpack(fields))
  local old = parse_state(raw)
  local new = was_latest and fallen_back(old, tid, latest_id, latest) or old
  if was_latest then
    redis.call('HSET', u.state, tid, format_state(new))
    reindex(u, tid, old, new)
  end
  local c = count_change(u, old, new)
  return append(u, {type = 'update', id = tid, thread = 1}, log_max, c)
end

-- The thread (item id, record field, ids field) activity `id` is in, and the item's state.
local function find_thread(raw)
  if raw then
    local record_field, ids_field = thread_fields(u, id, redis.call('HGET', u.items, id))
    return id, record_field, ids_field, raw
  end
  local content = redis.call('HGET', u.items, 'a:' .. id)
  if not content then return nil end
  local tid, record_field, ids_field = holder(content)
  if not tid then return nil end
  return tid, record_field, ids_field, redis.call('HGET', u.state, tid)
end

local seq = 0
local raw = redis.call('HGET', u.state, id)
if raw and not parse_state(raw).thread then
  local _, c = drop(u, id, raw)
  seq = append(u, {type = 'delete', id = id}, log_max, c)
else
  local tid, record_field, ids_field, state = find_thread(raw)
  local ids = tid and redis.call('HGET', u.items, ids_field) or ''
  local at = tid and position(ids, id)
  if state and at then seq = withdraw(state, tid, record_field, ids_field, ids, at) end
end
return {seq, seq > 0 and 1 or 0, next_expiry(u)}
