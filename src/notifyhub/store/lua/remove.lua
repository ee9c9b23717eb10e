-- Delete some of one user's items. ARGV: log_max, ids...
-- Returns {last_seq, removed, next_expiry_ms or false}.
-- Codec: store/codecs.py RemoveArgs -> Dropped; layout tested by test_script_layouts.py.
local u = inbox(0)
local log_max = tonumber(ARGV[1])
purge(u, now_ms(), log_max)
local last, removed = 0, 0
for i = 2, #ARGV do
  local st, c = drop(u, ARGV[i])
  if st then
    last = append(u, {type = 'delete', id = ARGV[i]}, log_max, c)
    removed = removed + 1
  end
end
return {last, removed, next_expiry(u)}
