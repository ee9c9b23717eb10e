-- Read a topic's cached membership in one atomic step (one slot, so Cluster-safe).
-- KEYS: users, groups, meta. Returns {deleted ('' = not cached, '0', '1'), users, groups}.
return {redis.call('HGET', KEYS[3], 'deleted') or '', redis.call('SMEMBERS', KEYS[1]),
        redis.call('SMEMBERS', KEYS[2])}
