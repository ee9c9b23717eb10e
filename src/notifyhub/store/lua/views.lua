-- Give one user the view definitions that apply to them now and recount their views: the
-- tenant's (version, lines) and the user's own (version, lines), lines as lua/common.lua
-- reads them. A part older than the one the user has is ignored, so a process holding a
-- stale copy of the tenant's views cannot undo a newer sync; a personal view named like a
-- tenant view is left out (the tenant's wins). When the definitions change, every copy's
-- views and every view counter are recomputed from the stored copies, and a `views`
-- change carries the new counts to the user's streams.
-- ARGV: log_max, tenant_version, tenant_lines, personal_version, personal_lines.
-- Returns {seq of the views change (0: the definitions did not change), tenant version,
-- personal version (the ones the user has now)}.
-- Codec: store/codecs.py ViewsArgs -> Synced; layout tested by test_script_layouts.py.
local u = inbox(0)
local log_max = tonumber(ARGV[1])
purge(u, now_ms(), log_max)
local have = redis.call('HMGET', u.cnt, 'vt', 'vtd', 'vp', 'vpd', 'vdefs')
local vt, td = tonumber(have[1]) or -1, have[2] or ''
local vp, pd = tonumber(have[3]) or -1, have[4] or ''
if tonumber(ARGV[2]) >= vt then vt, td = tonumber(ARGV[2]), ARGV[3] end
if tonumber(ARGV[4]) >= vp then vp, pd = tonumber(ARGV[4]), ARGV[5] end
redis.call('HSET', u.cnt, 'vt', vt, 'vtd', td, 'vp', vp, 'vpd', pd)

local lines, names, own, tenant_names = {}, {}, {}, {}
for line in string.gmatch(td, '[^\n]+') do
  lines[#lines + 1] = line
  names[#names + 1] = string.match(line, '^[^\t]*')
  tenant_names[names[#names]] = true
end
local tenant_n = #lines
for line in string.gmatch(pd, '[^\n]+') do
  local name = string.match(line, '^[^\t]*')
  if not tenant_names[name] then
    lines[#lines + 1] = line
    names[#names + 1] = name
    own[#own + 1] = line
  end
end
local raw = table.concat(lines, '\n')
if raw == (have[5] or '') then  -- the same views in the same slots: nothing to recount,
  if raw ~= '' then             -- but which of them are the tenant's may have changed
    redis.call('HSET', u.cnt, 'vtn', tenant_n, 'vpx', table.concat(own, '\n'))
  end
  return {0, vt, vp}
end

local defs = raw ~= '' and parse_defs(raw) or {}
local list = {}  -- total, unread, unseen per view, flat
for i = 1, 3 * #defs do list[i] = 0 end
local states = redis.call('HGETALL', u.state)
for i = 1, #states, 2 do
  local id, st = states[i], parse_state(states[i + 1])
  local mask = 0
  if #defs > 0 then mask = content_mask(defs, st.category, shown_content(u, id)) end
  if mask ~= st.views then
    st.views = mask
    redis.call('HSET', u.state, id, format_state(st))
  end
  local t, r, s = vec(st)
  local bit = 1
  for k = 3, 3 * #defs, 3 do
    if math.floor(mask / bit) % 2 == 1 then
      list[k - 2], list[k - 1], list[k] = list[k - 2] + t, list[k - 1] + r, list[k] + s
    end
    bit = bit * 2
  end
end
local before = counter_fields(tonumber(redis.call('HGET', u.cnt, 'vk')) or 0)
if #before > 3 then redis.call('HDEL', u.cnt, unpack(before, 4)) end
if raw == '' then redis.call('HDEL', u.cnt, 'vdefs', 'vnames', 'vtn', 'vpx', 'vk') else
  local set = {'vdefs', raw, 'vnames', table.concat(names, ';'), 'vtn', tenant_n,
               'vpx', table.concat(own, '\n'), 'vk', #defs}
  local fields = counter_fields(#defs)
  for k = 1, #defs do
    local counters = list[3 * k - 2] .. ',' .. list[3 * k - 1] .. ',' .. list[3 * k]
    set[#set + 1], set[#set + 2] = fields[3 + k], counters
  end
  redis.call('HSET', u.cnt, unpack(set))
end
user_defs[u.cnt], user_views[u.cnt] = nil, nil
return {append(u, {type = 'views'}, log_max), vt, vp}
