-- Token bucket, refilled continuously from Redis' own clock (one clock for every process).
-- KEYS[1]  hash {tokens, ts}: what is left, and when it was last refilled (ms)
-- ARGV[1]  refill rate, tokens per second (> 0)
-- ARGV[2]  burst: the bucket's capacity
-- ARGV[3]  most tokens to take: a process may take a small lease of tokens at once and
--          spend them locally (at least one token is taken, or none)
-- Returns {tokens taken, 0} when admitted, {0, ms until one token is back} when not.
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(saved[1]) or burst
local ts = tonumber(saved[2]) or now
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1000)
end
local taken, wait_ms = 0, 0
if tokens >= 1 then
  taken = math.min(want, math.floor(tokens))
  tokens = tokens - taken
else
  wait_ms = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', now)
-- A full bucket is the same as no bucket: let idle ones expire.
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return {taken, wait_ms}
