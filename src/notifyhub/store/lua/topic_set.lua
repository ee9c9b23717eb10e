-- Replace a topic's cached membership unless the cache already holds a newer version.
-- KEYS: users, groups, meta. ARGV: version, deleted ('1' = tombstone), n_users, users..., groups...
-- Returns 1 when written, 0 when the cache was as new or newer.
local version, deleted, n_users = tonumber(ARGV[1]), ARGV[2] == '1', tonumber(ARGV[3])
local cached = tonumber(redis.call('HGET', KEYS[3], 'version') or '0')
if cached >= version then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
local function add(key, first, last)
  for i = first, last, 5000 do
    redis.call('SADD', key, unpack(ARGV, i, math.min(i + 4999, last)))
  end
end
add(KEYS[1], 4, 3 + n_users)
add(KEYS[2], 4 + n_users, #ARGV)
redis.call('HSET', KEYS[3], 'version', version, 'deleted', deleted and '1' or '0')
return 1
