-- An escalation step fell due: is the user's copy still there and not yet in the state
-- that cancels the step? Read in one script with every change to the copy (mark, remove,
-- recall, purge run under the same hash tag), so a read committed before this call wins.
-- ARGV: log_max, id, unless ('seen' | 'read' | 'archived').
-- Returns {code, at_ms}: 1 send; 0 the copy is gone (deleted, recalled, expired);
-- 2 seen; 3 read (at_ms: when); 4 archived; 5 the user's inbox is not in Redis at all
-- (lost, not rebuilt yet: ask again later).
-- Codec: store/escalation.py EscalationCheck.
local u = inbox(0)
local log_max, id, unless = tonumber(ARGV[1]), ARGV[2], ARGV[3]
if redis.call('EXISTS', u.seq) == 0 then return {5, 0} end
purge(u, now_ms(), log_max)
local raw = redis.call('HGET', u.state, id)
if not raw then return {0, 0} end
local st = parse_state(raw)
if unless == 'archived' then
  if st.archived then return {4, 0} end
  return {1, 0}
end
if st.read_at > 0 then return {3, st.read_at} end
if unless == 'seen' and st.seen then return {2, 0} end
return {1, 0}
