-- The mover for one (set, topic): due ids -> ready, atomically (nothing popped and
-- lost, nothing pushed twice). Also re-offers reservations whose visibility expired.
-- KEYS: due, ready, reserved, state. ARGV: limit
-- Returns {oldest_due_age_ms or -1, backlog (still delayed), n_moved, moved ids..., reoffered ids...}.
-- Writes are batched (one ZREM / ZADD / HSET per batch, not per id): a burst of
-- 100k ids due at once is bounded by these calls, so they must stay few.
local now, limit = now_ms(), tonumber(ARGV[1])
local CHUNK = 500  -- arguments per batched call (well under Lua's unpack limit)

-- Call `cmd key ...` with `args` split into chunks of CHUNK (a multiple of `step`).
local function batched(cmd, key, args, step)
  local size = CHUNK * step
  for i = 1, #args, size do
    redis.call(cmd, key, unpack(args, i, math.min(i + size - 1, #args)))
  end
end

-- Move `ids` whose state is `from` to ready; `score_of(id, i)` gives the due part.
local function to_ready(ids, from, score_of, receipt_of)
  local out, zadd, hset = {}, {}, {}
  for i, id in ipairs(ids) do
    local found = redis.call('HMGET', KEYS[4], id, id .. ':p')
    if found[1] then
      local status, receipt, n = parse(found[1])
      if status == from then
        local priority = tonumber(found[2] or '0')
        zadd[#zadd + 1] = (9 - priority) * 1e13 + score_of(i)
        zadd[#zadd + 1] = id
        hset[#hset + 1] = id
        hset[#hset + 1] = state('ready', receipt_of(receipt), n)
        out[#out + 1] = id
      end
    end
  end
  batched('ZADD', KEYS[2], zadd, 2)
  batched('HSET', KEYS[4], hset, 2)
  return out
end

local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
local due_ids, due_ms = {}, {}
for i = 1, #due, 2 do
  due_ids[#due_ids + 1] = due[i]
  due_ms[#due_ms + 1] = tonumber(due[i + 1])
end
-- The due ids are exactly the first #due_ids by rank: drop them in one call.
if #due_ids > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #due_ids - 1) end
local moved = to_ready(due_ids, 'delayed',
  function(i) return due_ms[i] end, function(receipt) return receipt end)

local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, limit)
batched('ZREM', KEYS[3], expired, 1)
local reoffered = to_ready(expired, 'reserved',
  function() return now end, function() return '' end)

local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local oldest = -1
if head[2] and tonumber(head[2]) <= now then oldest = now - tonumber(head[2]) end
local out = {oldest, redis.call('ZCARD', KEYS[1]), #moved}
for _, id in ipairs(moved) do out[#out + 1] = id end
for _, id in ipairs(reoffered) do out[#out + 1] = id end
return out
