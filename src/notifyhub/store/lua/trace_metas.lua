-- KEYS: routing traces. Each one's `meta` field (nil where the trace is gone).
local out = {}
for i, key in ipairs(KEYS) do out[i] = redis.call('HGET', key, 'meta') end
return out
