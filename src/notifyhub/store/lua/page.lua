-- One page of one user's items, filtered, with a scan budget.
-- ARGV: log_max, order ('desc' newest first | 'asc'), bound (ZRANGEBYLEX form),
--       limit, status ('all'|'unread'|'read'), category ('' any), budget
-- Returns {next_cursor or false, unread, id1, content1, state1, id2, ...}.
-- Codec: store/codecs.py PageArgs -> Paged; layout tested by test_script_layouts.py.
local u = inbox(0)
local log_max, desc, bound = tonumber(ARGV[1]), ARGV[2] == 'desc', ARGV[3]
local limit, status, category, budget = tonumber(ARGV[4]), ARGV[5], ARGV[6], tonumber(ARGV[7])
purge(u, now_ms(), log_max)

local function matches(st)
  if category ~= '' and st.category ~= category then return false end
  if status == 'unread' then return st.read_at == 0 end
  if status == 'read' then return st.read_at ~= 0 end
  return true
end

local function chunk(from, n)
  if desc then return redis.call('ZREVRANGEBYLEX', u.time, from, '-', 'LIMIT', 0, n) end
  return redis.call('ZRANGEBYLEX', u.time, from, '+', 'LIMIT', 0, n)
end

local found, states, scanned, last, exhausted = {}, {}, 0, nil, false
while #found < limit and scanned < budget do
  local ids = chunk(bound, math.min(100, budget - scanned))
  if #ids == 0 then exhausted = true; break end
  local raw = redis.call('HMGET', u.state, unpack(ids))
  for i, id in ipairs(ids) do
    scanned = scanned + 1
    last = id
    local st = parse_state(raw[i])
    if matches(st) then
      found[#found + 1] = id
      states[#states + 1] = raw[i]
      if #found == limit then break end
    end
  end
  bound = '(' .. last
end

local next_cursor = false
if last and not exhausted and #chunk('(' .. last, 1) > 0 then next_cursor = last end
local out = {next_cursor, counts(u).unread}
for i, id in ipairs(found) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', u.items, id)
  out[#out + 1] = states[i]
end
return out
