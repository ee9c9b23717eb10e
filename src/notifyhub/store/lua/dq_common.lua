-- Shared by the delayed-queue scripts. A message's state string is
-- "status|receipt|deliveries" (status: delayed, ready, reserved, consumed, cancelled).
-- Ready scores order by priority (9 first), then due time: (9 - p) * 1e13 + due_ms.

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function parse(s)
  local a = string.find(s, '|', 1, true)
  local b = string.find(s, '|', a + 1, true)
  return string.sub(s, 1, a - 1), string.sub(s, a + 1, b - 1), tonumber(string.sub(s, b + 1))
end

local function state(status, receipt, deliveries)
  return status .. '|' .. receipt .. '|' .. deliveries
end
