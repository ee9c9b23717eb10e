-- Mark every unread item of one user read (action 'read'), or archive every item not yet
-- archived (action 'archive'), optionally only one category and/or only items created
-- before a ULID bound (by list order: a resurfaced item by when it came back), and/or only
-- the items of one of the user's views: by name, the copies whose view bit is set (what
-- the view's list shows), or, replaying a logged one, by the view's definition line
-- evaluated on each copy's content (its bits may not be synced yet after a Redis loss).
-- ARGV: log_max, category ('' any), before_id ('' none), action ('' = 'read', for calls
-- logged before archiving existed), view (a name, '' none: a view the user lacks marks
-- nothing), view_line (lua/common.lua's definition line, '' none; wins over `view`).
-- Returns {last_seq, updated, view_line (the named view's line as the user has it, '' when
-- they have none of that name or none was named)}.
-- Codec: store/codecs.py MarkAllArgs -> MarkedAll; layout tested by test_script_layouts.py.
local u = inbox(0)
local log_max, category, before = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local archive = ARGV[4] == 'archive'
local view, view_line = ARGV[5] or '', ARGV[6] or ''
local now = now_ms()
purge(u, now, log_max)

local view_bit, view_def = nil, nil  -- the named view's bit; or the given line's definition
if view_line ~= '' then
  view_def = parse_defs(view_line)
elseif view ~= '' then
  view_bit, view_line = named_view(u, view)
  view_line = view_line or ''
end

local function in_view(id, st)
  if view_def then return content_mask(view_def, st.category, shown_content(u, id)) == 1 end
  return not view_bit or has_view(st, view_bit)
end

local upper = (before ~= '') and ('(' .. before) or '+'
local members = redis.call('ZRANGEBYLEX', u.time, '-', upper)
local last, updated = 0, 0
for _, member in ipairs(members) do
  local id, raw = member_id(u, member)
  local st = id and parse_state(raw)
  local due = st and (archive and not st.archived or (not archive and st.read_at == 0))
  if due and (category == '' or st.category == category) and in_view(id, st) then
    local new = copy_state(st)
    if archive then new.archived = true else
      new.read_at = now
      new.seen = true
    end
    redis.call('HSET', u.state, id, format_state(new))
    local c = count_change(u, st, new)
    last = append(u, {type = 'update', id = id, read_at = new.read_at, seen = new.seen,
                      archived = new.archived, pinned = new.pinned,
                      snoozed = new.snoozed}, log_max, c)
    updated = updated + 1
  end
end
return {last, updated, view_line}
