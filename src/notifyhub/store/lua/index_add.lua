-- KEYS[1]: a deferred fan-out's recipient index; ARGV[1]: its members (`tenant/user`), one
-- per line (a user id is one line: no line break in it). SADDs them, UNPACK_AT at a time
-- (Lua's unpack has a stack limit). One string argument instead of one per member: the
-- hub packs a few KiB in C, not thousands of arguments in Python. Returns how many lines.
local UNPACK_AT = 500
local batch, n = {}, 0
for member in string.gmatch(ARGV[1], '[^\n]+') do
  n = n + 1
  batch[#batch + 1] = member
  if #batch == UNPACK_AT then
    redis.call('SADD', KEYS[1], unpack(batch))
    batch = {}
  end
end
if #batch > 0 then
  redis.call('SADD', KEYS[1], unpack(batch))
end
return n
