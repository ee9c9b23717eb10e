-- Complete one action of one user's copy, once: which one (its place in the content's
-- `actions`, from 1) and when, kept as the state flag "c<k>@<ms>"; the copy is read (and
-- seen) too. A copy with an action completed refuses another, and says which it was.
-- ARGV: log_max, id, k, action id (logged in the `update` entry), at_ms ('' now; a
-- replay gives the logged time), and for a thread the activity whose actions were shown
-- ('' none): when the thread shows another since, nothing is done (code 3).
-- Returns {seq, code, done}: code 0 missing, 1 already completed, 2 completed now, 3 the
-- thread shows another activity; done "k@ms" (of the first completion when already
-- completed; '' otherwise).
-- Codec: store/codecs.py ActArgs -> Acted; layout tested by test_script_layouts.py.
local u = inbox(0)
local log_max, id, k, action, at = tonumber(ARGV[1]), ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local activity = ARGV[6] or ''
local now = now_ms()
purge(u, now, log_max)
local raw = redis.call('HGET', u.state, id)
if not raw then return {0, 0, ''} end
if activity ~= '' then  -- the content after the thread's summary is the activity shown
  local shown = shown_content(u, id)
  if not string.find(shown, '},"id":"' .. activity .. '"', 1, true) then return {0, 3, ''} end
end
local old = parse_state(raw)
if old.done ~= '' then return {0, 1, old.done} end
local new = copy_state(old)
new.done = k .. '@' .. (at ~= '' and at or string.format('%d', now))
if new.read_at == 0 then new.read_at = now end
new.seen = true
redis.call('HSET', u.state, id, format_state(new))
local c = count_change(u, old, new)
local seq = append(u, {type = 'update', id = id, read_at = new.read_at, seen = new.seen,
                       archived = new.archived, pinned = new.pinned, snoozed = new.snoozed,
                       completed = new.done, action = action}, log_max, c)
return {seq, 2, new.done}
