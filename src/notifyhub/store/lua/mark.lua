-- Change read/seen state of some of one user's items.
-- ARGV: log_max, read ('1' read, '0' unread, '' unchanged), seen ('1' or ''), ids...
-- Returns {last_seq, code per id}: 0 missing, 1 unchanged, 2 changed.
-- Codec: store/codecs.py MarkArgs -> Marked; layout tested by test_script_layouts.py.
local u = inbox(0)
local log_max, read, seen = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local now = now_ms()
purge(u, now, log_max)
local codes, last = {}, 0
for i = 4, #ARGV do
  local id = ARGV[i]
  local raw = redis.call('HGET', u.state, id)
  if not raw then
    codes[#codes + 1] = 0
  else
    local old, new = parse_state(raw), parse_state(raw)
    if read == '1' and new.read_at == 0 then new.read_at = now; new.seen = true end
    if read == '0' then new.read_at = 0 end
    if seen == '1' then new.seen = true end
    if new.read_at == old.read_at and new.seen == old.seen then
      codes[#codes + 1] = 1
    else
      redis.call('HSET', u.state, id, format_state(new))
      local c = count_change(u, old, new)
      last = append(u, {type = 'update', id = id, read_at = new.read_at, seen = new.seen}, log_max, c)
      codes[#codes + 1] = 2
    end
  end
end
return {last, codes}
