-- The mover for one (set, queue): due ids -> ready, atomically (nothing popped and
-- lost, nothing pushed twice). Also re-offers reservations whose visibility expired.
-- KEYS: due, ready, reserved, state, due_v1, queues. ARGV: limit, queue
-- A queue left with nothing delayed, ready or in flight in this set leaves the set's
-- `queues` list (push adds it back), so the mover's work and the queue listing follow
-- the queues in use, not every name ever pushed to.
-- Returns {oldest_due_age_ms or -1, backlog (still delayed), next_due_in_ms or -1,
-- n_moved, moved ids..., reoffered ids...}.
-- Only ids still waiting are ever in the due zset (push adds them, cancel removes them
-- atomically with its state change), and the due score carries the priority: a move
-- reads no state and writes none, just one ZRANGEBYSCORE, one ZREMRANGEBYRANK and a few
-- batched ZADDs per call. A burst of 100k ids due at once is bounded by these calls.
local now, limit = now_ms(), tonumber(ARGV[1])
local CHUNK = 500  -- arguments per batched call (well under Lua's unpack limit)

-- Call `cmd key ...` with `args` split into chunks of CHUNK (a multiple of `step`).
local function batched(cmd, key, args, step)
  local size = CHUNK * step
  for i = 1, #args, size do
    redis.call(cmd, key, unpack(args, i, math.min(i + size - 1, #args)))
  end
end

-- Layout 1 (before priorities lived in due scores) kept due_ms scores in another key:
-- re-score up to `limit` of its ids into the due zset. Idempotent; a no-op once empty.
local function convert_v1()
  local old = redis.call('ZRANGE', KEYS[5], 0, limit - 1, 'WITHSCORES')
  local zadd = {}
  for i = 1, #old, 2 do
    local found = redis.call('HMGET', KEYS[4], old[i], old[i] .. ':p')
    if found[1] and parse(found[1]) == 'delayed' then
      zadd[#zadd + 1] = due_score(tonumber(old[i + 1]), tonumber(found[2] or '0'))
      zadd[#zadd + 1] = old[i]
    end
  end
  if #old > 0 then redis.call('ZREMRANGEBYRANK', KEYS[5], 0, #old / 2 - 1) end
  batched('ZADD', KEYS[1], zadd, 2)
end

if redis.call('EXISTS', KEYS[5]) == 1 then convert_v1() end

local out = {-1, 0, -1, 0}
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', due_score(now, 0),
  'WITHSCORES', 'LIMIT', 0, limit)
local n = #due / 2
-- The due ids are exactly the first n by rank: drop them in one call.
if n > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1) end
local zadd = {}
for i = 1, #due, 2 do
  zadd[i] = ready_score(tonumber(due[i + 1]))
  zadd[i + 1] = due[i]
  out[#out + 1] = due[i]
end
batched('ZADD', KEYS[2], zadd, 2)
out[4] = n

-- Expired reservations: rare, so each is checked and its state written.
local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, limit)
batched('ZREM', KEYS[3], expired, 1)
local again, hset = {}, {}
for _, id in ipairs(expired) do
  local found = redis.call('HMGET', KEYS[4], id, id .. ':p')
  if found[1] then
    local status, _, offers = parse(found[1])
    if status == 'reserved' then
      again[#again + 1] = (9 - tonumber(found[2] or '0')) * 1e13 + now
      again[#again + 1] = id
      hset[#hset + 1] = id
      hset[#hset + 1] = state('ready', '', offers)
      out[#out + 1] = id
    end
  end
end
batched('ZADD', KEYS[2], again, 2)
batched('HSET', KEYS[4], hset, 2)

local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if head[2] then
  local head_due = math.floor(tonumber(head[2]) / 10)
  if head_due <= now then out[1] = now - head_due end
  out[3] = math.max(head_due - now, 0)
end
out[2] = redis.call('ZCARD', KEYS[1])
if out[2] == 0 and redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[5]) == 0 then
  redis.call('SREM', KEYS[6], ARGV[2])
end
return out
