-- One page of one user's items, filtered, with a scan budget.
-- ARGV: log_max, order ('desc' newest first | 'asc'), bound (ZRANGEBYLEX form),
--       limit, status ('all'|'unread'|'read'|'archived'|'snoozed'), category ('' any), budget,
--       stop (ZRANGEBYLEX form: where the scan ends, '-' / '+' for the end),
--       pinned ('first': pinned items ahead of the others, out of the scan | 'skip': out
--       of the scan (the pages past the pinned ones) | 'only' | 'none': only unpinned
--       items | '': in time order),
--       tags_any (comma-separated, '' none), tags_all (same), severity_min (rank, 0 any),
--       actor ('' any), view (a view's name, '' none: only the copies in it; a view
--       the user does not have lists nothing),
--       pin_after (with 'first': only the pinned items whose sort key's first ULID_LEN
--       characters sort below it, '' all of them: a page that goes on among the pins)
-- Archived items appear only under status 'archived', snoozed ones (not archived) only
-- under 'snoozed'. Filters on tags, severity and actor
-- read the item's content (only the items the state filters let through).
-- Returns {next_cursor (the last member's first ULID_LEN characters: lua/common.lua
-- `sort_key`; 'pin.' and the last pinned item's when the page ended among the pinned
-- ones) or false, unread, id1, content1, state1, id2, ...}; with pinned 'first' the
-- matching pinned items come first and count in `limit`.
-- Codec: store/codecs.py PageArgs -> Paged; layout tested by test_script_layouts.py.
local u = inbox(0)
local log_max, desc, bound = tonumber(ARGV[1]), ARGV[2] == 'desc', ARGV[3]
local limit, status, category, budget = tonumber(ARGV[4]), ARGV[5], ARGV[6], tonumber(ARGV[7])
local stop, pinned = ARGV[8], ARGV[9]
local tags_any, tags_all, severity_min, actor = ARGV[10], ARGV[11], tonumber(ARGV[12]), ARGV[13]
local view, pin_after = ARGV[14] or '', ARGV[15] or ''
purge(u, now_ms(), log_max)

local view_bit = view ~= '' and named_view(u, view) or nil  -- 0: a view the user lacks

local any, all = split(tags_any, ','), split(tags_all, ',')
local by_content = #any > 0 or #all > 0 or severity_min > 0 or actor ~= ''

local function content_matches(content)
  local n = cjson.decode(content)
  if severity_min > 0 and (RANK[n.severity or 'info'] or 0) < severity_min then return false end
  if actor ~= '' and not (type(n.actor) == 'table' and n.actor.id == actor) then return false end
  local has = {}
  if type(n.tags) == 'table' then for _, tag in ipairs(n.tags) do has[tag] = true end end
  for _, tag in ipairs(all) do if not has[tag] then return false end end
  if #any == 0 then return true end
  for _, tag in ipairs(any) do if has[tag] then return true end end
  return false
end

local function matches(st)
  if (status == 'archived') ~= st.archived then return false end
  if status ~= 'archived' and (status == 'snoozed') ~= (st.snoozed > 0) then return false end
  if category ~= '' and st.category ~= category then return false end
  if pinned == 'only' and not st.pinned then return false end
  if pinned == 'none' and st.pinned then return false end
  if view_bit and not has_view(st, view_bit) then return false end
  if status == 'unread' then return st.read_at == 0 end
  if status == 'read' then return st.read_at ~= 0 end
  return true
end

local found, states, contents = {}, {}, {}
local function take(id, raw, content)
  found[#found + 1] = id
  states[#states + 1] = raw
  contents[#contents + 1] = content
end

local function consider(id, raw)
  if not matches(parse_state(raw)) then return end
  local content = shown_content(u, id)
  if by_content and not content_matches(content) then return end
  take(id, raw, content)
end

-- Whether a sort key lies between the scan's start and stop (ZRANGEBYLEX forms, desc).
local function in_range(key)
  local high, low = string.sub(bound, 2), string.sub(stop, 2)
  if bound ~= '+' and not (key < high or (bound:sub(1, 1) == '[' and key == high)) then
    return false
  end
  return stop == '-' or key > low or (stop:sub(1, 1) == '[' and key == low)
end

local skip, pin_cursor = {}, false
if pinned == 'first' or pinned == 'skip' then  -- pinned items lead, then the others
  local list = {}  -- newest first by list order, as `pinned=only` lists them (a thread
  for _, id in ipairs(pins(u)) do  -- or a resurfaced copy by when it came back)
    skip[id] = true
    local raw = pinned == 'first' and redis.call('HGET', u.state, id)
    local key = raw and sort_key(id, parse_state(raw))
    local after = key and (pin_after == '' or string.sub(key, 1, ULID_LEN) < pin_after)
    if after and in_range(key) then list[#list + 1] = {id, raw, key} end
  end
  table.sort(list, function(a, b) return a[3] > b[3] end)
  local rest = false  -- pinned items left for the next page
  for i, pin in ipairs(list) do
    if #found == limit then rest = list[i - 1][3]; break end
    consider(pin[1], pin[2])
  end
  local others = redis.call('ZCARD', u.time) > #pins(u)
  if not rest and #found == limit and #list > 0 and others then rest = list[#list][3] end
  if rest then pin_cursor = 'pin.' .. string.sub(rest, 1, ULID_LEN) end
end

local function chunk(from, n)
  if desc then return redis.call('ZREVRANGEBYLEX', u.time, from, stop, 'LIMIT', 0, n) end
  return redis.call('ZRANGEBYLEX', u.time, from, stop, 'LIMIT', 0, n)
end

local scanned, last, exhausted = 0, nil, false
while not pin_cursor and #found < limit and scanned < budget do
  local ids = chunk(bound, math.min(100, budget - scanned))
  if #ids == 0 then exhausted = true; break end
  local raw = redis.call('HMGET', u.state, unpack(ids))
  for i, member in ipairs(ids) do
    scanned = scanned + 1
    last = member
    local id, state = member_id(u, member, raw[i])  -- a resurfaced copy's sort key: its id
    if id and not skip[id] then consider(id, state) end
    if #found == limit then break end
  end
  bound = '(' .. last
end

local next_cursor = pin_cursor
if last and not exhausted and #chunk('(' .. last, 1) > 0 then
  next_cursor = string.sub(last, 1, ULID_LEN)  -- a moved copy's sort key: its ULID part
end
local out = {next_cursor, counts(u).unread}
for i, id in ipairs(found) do
  out[#out + 1] = id
  out[#out + 1] = contents[i]
  out[#out + 1] = states[i]
end
return out
