-- Mark every unread item of one user read (action 'read'), or archive every item not yet
-- archived (action 'archive'), optionally only one category and/or only items created
-- before a ULID bound (by list order: a resurfaced item by when it came back). ARGV: log_max, category ('' any), before_id ('' none), action
-- ('' = 'read', for calls logged before archiving existed)
-- Returns {last_seq, updated}.
-- Codec: store/codecs.py MarkAllArgs -> MarkedAll; layout tested by test_script_layouts.py.
local u = inbox(0)
local log_max, category, before = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local archive = ARGV[4] == 'archive'
local now = now_ms()
purge(u, now, log_max)
local upper = (before ~= '') and ('(' .. before) or '+'
local members = redis.call('ZRANGEBYLEX', u.time, '-', upper)
local last, updated = 0, 0
for _, member in ipairs(members) do
  local id, raw = member_id(u, member)
  local st = id and parse_state(raw)
  local due = st and (archive and not st.archived or (not archive and st.read_at == 0))
  if due and (category == '' or st.category == category) then
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
return {last, updated}
