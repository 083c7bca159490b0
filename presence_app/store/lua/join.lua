-- join(user, conn, room): the connection enters a room (it moves into the user's record). The
-- room hears of it only when this is the user's first connection there and they are visible.
local uid, cid, room = ARGV[A], ARGV[A + 1], ARGV[A + 2]
local u = load_user(uid)
local idx = index_of(u.st)
local score = conn_score(idx, uid)  -- (an HTTP-only user, WEB, holds no connection)
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
