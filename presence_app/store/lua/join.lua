-- join(user, conn, room): the connection enters a room (it moves into the user's record). The
-- room hears of it only when this is the user's first connection there and they are visible.
local uid, cid, room = ARGV[A], ARGV[A + 1], ARGV[A + 2]
-- A join already in its room with nothing to change answers here, before the rest of the
-- library's definitions are made (proc_alive comes ahead of it: scripts.py) and without the
-- full path's work (issue 43: half such a call's Redis time): what the full path below checks
-- before it returns without a write. The record holds the connection, open, with the room (so
-- the user has no registry field: lib.lua's load_user), every connection of the record is live
-- (its process's lease, or its grace, runs), no past window is there, and the user is listed
-- (a positive score in their index). Otherwise the full path goes on with what was read here.
local RAW = redis.call('HGET', K_RECS, uid)
local PRE_C, PRE_SCORE = nil, nil  -- the record's connections, decoded; the user's score
if RAW then
  local st, w, conns = string.match(RAW, '^([^\31]*)\31[^\31]*\31[^\31]*\31[^\31]*\31[^\31]*\31'
    .. '[^\31]*\31[^\31]*\31[^\31]*\31[^\31]*\31([^\31]*)\31[^\31]*\31([^\31]*)')
  if conns and conns ~= '' then
    PRE_C = cjson.decode(conns)
    local s = tonumber(redis.call('ZSCORE', st == 'invisible' and K_HIDDEN or K_SEEN, uid))
    PRE_SCORE = s and s > 0 and s or false
    local e = PRE_C[cid]
    local quick = PRE_SCORE and e ~= nil and string.sub(e[1], 1, 1) ~= '~'
      and (w == '' or tonumber(w) >= NOW)
    if quick then
      quick = false
      for i = 2, #e do if e[i] == room then quick = true end end
    end
    if quick then
      for _, f in pairs(PRE_C) do
        quick = proc_alive(f[1])
        if not quick then break end
      end
    end
    if quick then return '' end  -- (no transition)
  end
end
-- (the library)
local u = user_of(uid, RAW)
if PRE_C then u._c = PRE_C end
local idx = index_of(u.st)
local score = PRE_SCORE or nil  -- (an HTTP-only user, WEB, holds no connection)
if PRE_SCORE == nil then score = conn_score(idx, uid) end
local listed = score ~= nil
local conns = live_conns(uid, u, listed)
local e = conns[cid]
if e == nil or string.sub(e[1], 1, 1) == '~' then
  return redis.error_reply('PRESENCE unknown connection')
end
-- already there: nothing to add, but the user's dead connections still go (a change of theirs)
local already = false
for i = 2, #e do if e[i] == room then already = true end end
if already then
  -- nothing to change either (no write, as keep_conns would write the same): a connection with
  -- rooms is in the record, and no registry field, dead connection or past window is there
  local live = registry_of(uid) == nil and (u.w == nil or num(u.w) >= NOW)
  for c, _ in pairs(conns_of(u)) do live = live and conns[c] ~= nil end
  if live then return transitions() end
end
local first = true
for _, r in ipairs(rooms_in(conns)) do if r == room then first = false end end
if not already then e[#e + 1] = room end
local _, _, la = registry_of(uid)
-- (a user is in K_GRACES only while their record holds a grace with rooms: with none before
-- and none after, schedule_graces has nothing to write)
local graced = grace_end(conns_of(u)) or grace_end(conns)
keep_conns(uid, u, conns, la or u.la, true, idx == K_SEEN and score)
if graced then schedule_graces(uid, conns) end
if not already and first and u.st ~= 'invisible' and room_add(uid, room) then
  emit('join', uid, room, public_state(u), NOW, u)
end
return transitions()
