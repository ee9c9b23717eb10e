-- Change the state of some of one user's items: read/unread/seen, archived, pinned.
-- ARGV: log_max, read ('1' read, '0' unread, '' unchanged), seen ('1' or ''),
--       archived ('1', '0', ''), pinned ('1', '0', ''), pin_max,
--       snooze (ms to snooze until, '0' to unsnooze, '' unchanged), ids...
-- Returns {last_seq, code per id}: 0 missing, 1 unchanged, 2 changed, 3 refused (pinning
-- it would pass pin_max pinned items; nothing of that id changed).
-- Codec: store/codecs.py MarkArgs -> Marked; layout tested by test_script_layouts.py.
local u = inbox(0)
local log_max, read, seen = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local archived, pinned, pin_max, snooze = ARGV[4], ARGV[5], tonumber(ARGV[6]), ARGV[7]
local now = now_ms()
purge(u, now, log_max)
local codes, last = {}, 0
for i = 8, #ARGV do
  local id = ARGV[i]
  local raw = redis.call('HGET', u.state, id)
  if not raw then
    codes[#codes + 1] = 0
  else
    local old = parse_state(raw)
    local new = copy_state(old)
    if read == '1' and new.read_at == 0 then new.read_at = now; new.seen = true end
    if read == '0' then new.read_at = 0 end
    if seen == '1' then new.seen = true end
    if archived ~= '' then new.archived = archived == '1' end
    if pinned ~= '' then new.pinned = pinned == '1' end
    if snooze ~= '' then new.snoozed = tonumber(snooze) end
    if new.pinned and not old.pinned and #pins(u) >= pin_max then
      codes[#codes + 1] = 3
    elseif new.read_at == old.read_at and new.seen == old.seen and new.archived == old.archived
        and new.pinned == old.pinned and new.snoozed == old.snoozed then
      codes[#codes + 1] = 1
    else
      redis.call('HSET', u.state, id, format_state(new))
      if new.pinned ~= old.pinned then set_pinned(u, id, new.pinned) end
      local c = count_change(u, old, new)
      last = append(u, {type = 'update', id = id, read_at = new.read_at, seen = new.seen,
                        archived = new.archived, pinned = new.pinned,
                        snoozed = new.snoozed}, log_max, c)
      codes[#codes + 1] = 2
    end
  end
end
return {last, codes}
