-- What a stream has not seen yet (pending copies placed first). KEYS: the user's 10.
-- ARGV: after_seq, max_entries, max_bytes.
-- Stops after the entry that brings the reply to max_bytes (at least one entry), so a
-- read of a large backlog, and a pipeline of many such reads, stays small.
-- Returns {seq, oldest_logged_seq or 0, epoch, entry1, content1 or false, state1 or false,
-- ...}; content/state are filled for notification entries, and the updates of a thread
-- an activity joined, whose item still exists.
-- Codec: store/codecs.py ChangesArgs -> changes_from_reply (test_script_layouts.py).
local u = inbox(0)
place_pending(u)
local seq = tonumber(redis.call('GET', u.seq) or '0')
local head = redis.call('ZRANGE', u.log, 0, 0, 'WITHSCORES')
local oldest = tonumber(head[2] or '0')
local out = {seq, oldest, epoch(u)}
local entries = redis.call('ZRANGEBYSCORE', u.log, '(' .. ARGV[1], '+inf', 'LIMIT', 0, tonumber(ARGV[2]))
local max_bytes = tonumber(ARGV[3])
local bytes = 0
for _, e in ipairs(entries) do
  out[#out + 1] = e
  bytes = bytes + #e
  local decoded = cjson.decode(e)
  if decoded.type == 'notification' or decoded.thread then
    local content = shown_content(u, decoded.id)
    out[#out + 1] = content
    out[#out + 1] = redis.call('HGET', u.state, decoded.id)
    if content then bytes = bytes + #content end
  else
    out[#out + 1] = false
    out[#out + 1] = false
  end
  if bytes >= max_bytes then break end
end
return out
