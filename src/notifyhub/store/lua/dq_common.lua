-- Shared by the delayed-queue scripts. A message's state string is
-- "status|receipt|offers". Status "delayed" means waiting: delayed while the id is
-- in the due zset, ready once the mover has taken it out (the mover never writes the
-- state, so a move is two zset commands per batch). The other statuses: ready (offered
-- again after a ttl), reserved, consumed, cancelled.
-- Due scores carry the priority: due_ms * 10 + (9 - p), so the mover computes a ready
-- score without reading anything else. Ready scores order by priority (9 first), then
-- due time: (9 - p) * 1e13 + due_ms.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function parse(s)
  local a = string.find(s, '|', 1, true)
  local b = string.find(s, '|', a + 1, true)
  return string.sub(s, 1, a - 1), string.sub(s, a + 1, b - 1), tonumber(string.sub(s, b + 1))
end

local function state(status, receipt, offers)
  return status .. '|' .. receipt .. '|' .. offers
end

-- Waiting for a consumer (delayed or ready): what reserve takes and cancel accepts.
local function waiting(status)
  return status == 'delayed' or status == 'ready'
end

local function due_score(due_ms, priority)
  return due_ms * 10 + (9 - priority)
end

-- The ready score of a due score (exact: both are integers below 2^53).
local function ready_score(score)
  local due_ms = math.floor(score / 10)
  return (score - due_ms * 10) * 1e13 + due_ms
end

-- The id's state string, or nil when it is unknown in `queue` (a queue is one (tenant,
-- name)): another queue's message must not be told apart from a missing one. Layout 2
-- messages recorded no queue and are not checked.
local function state_in(state_key, id, queue)
  local found = redis.call('HMGET', state_key, id, id .. ':q')
  if not found[1] or (found[2] and found[2] ~= queue) then return nil end
  return found[1]
end
