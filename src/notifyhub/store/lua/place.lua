-- Place copies of one notification in a batch of users' inboxes (KEYS: 10 per user, same
-- slot on Cluster).
-- ARGV: id, content_json, category, collapse_key, expires_ms, log_max, critical ('1'/''),
--       pull ('1': store, but no live notification event), items_per_user (0: no cap),
--       severity rank, tags (comma-separated; with the category they say which of each
--       user's views the copy is in), the version of the tenant's views the caller
--       evaluated ('' none) and the copy's mask of them, its thread key ('' none), the
--       thread window (ms), its creation (ms) and its actor line ("<id>\t<JSON>", '' none)
--       (lua/common.lua `join`), the ms its copies arrive at when later than its id's time
--       (a scheduled notification's delivery: they sort by it; 0 none),
--       then optionally (standalone Redis only: on a Cluster these keys and the channels
--       may live on other nodes) a tail: '1' when the last two KEYS are the
--       notification's recipient index and the expiry index ('' not), '1' to ring ('' not),
--       the doorbell's header (`!<item JSON>`), each user's `tenant/user`, then each
--       user's doorbell channel (store/doorbells.py `channels_of`). Indexed, the script
--       adds every user to both indexes (the set expiring a second after the
--       notification) before its copies; ringing, it PUBLISHes the doorbell with every
--       copy's event (store/doorbells.py), one message per channel, after its writes.
-- Returns seven values per user: the new seq (0 when that user already has this id, a
-- retried fan-out; -1 when the user's preferences drop this category, inbox: false);
-- how many oldest notifications its full inbox dropped (changes after that seq); its
-- unread, unseen and total counts right after the copy (0s when nothing was stored); and
-- the epoch of its seq ('' when nothing was stored); 1 when the user has views (their
-- counts are then in the log entry, and in the doorbell this script rings), else 0. Then
-- what copies pushed out, one string per user whose copy replaced or evicted something
-- (`<user's position, from 1> <replaced id, '' none>[ <evicted id>...]`: the routing
-- trace's detail, store/traces/writer.py), how many such strings, and how many
-- oldest notifications full inboxes dropped in all. A doorbell line carries the copy as
-- `tenant/user seq,unread,unseen,total,epoch`, then `,<names>:<counters>` (lua/common.lua
-- `logged_counts`) when the user has views.
-- Codec: store/codecs.py CopyArgs.place_args (+ PlaceTail) -> Placed
-- (layout tested by test_script_layouts.py).

-- Add the `count` users named from ARGV[first] on to the notification's recipient index
-- `rk` and, scored by the copy's expiry, to the expiry index `ek` (ZADD LT: an earlier
-- expiry of the user's stays); `rk` expires a second after the notification.
local function index_recipients(rk, ek, first, count)
  local last = first + count - 1
  for i = first, last, 1000 do
    local upto = math.min(i + 999, last)
    redis.call('SADD', rk, unpack(ARGV, i, upto))
    local scored = {}
    for j = i, upto do
      scored[#scored + 1] = ARGV[5]
      scored[#scored + 1] = ARGV[j]
    end
    redis.call('ZADD', ek, 'LT', unpack(scored))
  end
  redis.call('EXPIREAT', rk, math.floor(tonumber(ARGV[5]) / 1000) + 1)
end

local n = {id = ARGV[1], content = ARGV[2], category = ARGV[3], ck = ARGV[4],
           expires_ms = tonumber(ARGV[5]), log_max = tonumber(ARGV[6]),
           critical = ARGV[7] == '1', pull = ARGV[8] == '1', cap = tonumber(ARGV[9]),
           severity = tonumber(ARGV[10]), tags = tag_set(ARGV[11]), tver = tonumber(ARGV[12]),
           tmask = tonumber(ARGV[13]), thread = ARGV[14], window_ms = tonumber(ARGV[15]),
           created_ms = tonumber(ARGV[16]), actor = ARGV[17],
           arrived_ms = tonumber(ARGV[18])}
n.state = format_state(fresh_state(n))

local WHO = 22  -- ARGV of the first user's `tenant/user`, when there is a tail
local indexed = ARGV[19] == '1'
local per_user = #KEYS - (indexed and 2 or 0)
if indexed then index_recipients(KEYS[per_user + 1], KEYS[per_user + 2], WHO, per_user / 10) end
local ring = ARGV[20] == '1' and {}
local users = per_user / 10

-- Add `line` to the doorbell of the channel of the user at `o` (one message per channel,
-- each starting with the header, in the order the channels first come).
local function rung(o, line)
  local channel = ARGV[WHO + users + o / 10]
  local lines = ring[channel]
  if not lines then
    lines = {ARGV[21]}
    ring[channel] = lines
    ring[#ring + 1] = channel
  end
  lines[#lines + 1] = line
end

local out, evicted, pushed = {}, 0, {}
for o = 0, per_user - 1, 10 do
  local u = inbox(o)
  local placed = place_pending(u)  -- what is pending first: seqs keep placement order
  local seq, dropped, c, replaced, ids = copy(u, n)
  if replaced or dropped > 0 then
    pushed[#pushed + 1] = (o / 10 + 1) .. ' ' .. (replaced or '')
      .. (dropped > 0 and ' ' .. table.concat(ids, ' ') or '')
  end
  local e = seq > 0 and epoch(u) or ''
  if ring then  -- a copy whose inbox dropped others is re-read: the log has those too
    local who = ARGV[WHO + o / 10]
    if seq > 0 and dropped == 0 then
      local line = who .. ' ' .. seq .. ',' .. c.unread .. ',' .. c.unseen .. ',' .. c.total
        .. ',' .. e
      local v = views_of(u)
      if v and c.views then line = line .. ',' .. v.names .. ':' .. table.concat(c.views, ';') end
      rung(o, line)
    else
      rung(o, who .. ' 0')
    end
  end
  out[#out + 1] = seq
  out[#out + 1] = dropped
  if c then
    out[#out + 1] = c.unread
    out[#out + 1] = c.unseen
    out[#out + 1] = c.total
  else
    out[#out + 1] = 0
    out[#out + 1] = 0
    out[#out + 1] = 0
  end
  out[#out + 1] = e
  out[#out + 1] = views_of(u) and 1 or 0
  evicted = evicted + placed + dropped
end
for _, line in ipairs(pushed) do out[#out + 1] = line end
out[#out + 1] = #pushed
out[#out + 1] = evicted
if ring then
  for _, channel in ipairs(ring) do redis.call('PUBLISH', channel, table.concat(ring[channel], '\n')) end
end
return out
