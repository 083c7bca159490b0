-- join(user, conn, room): the connection enters a room. The room hears of it only when this is
-- the user's first connection there (and the user is visible).
local uid, cid, room = ARGV[A], ARGV[A + 1], ARGV[A + 2]
local u, uk = load_user(uid)
local rooms = conns_of(u)[cid]
if rooms == nil or redis.call('ZSCORE', K_LEASES, uid .. '|' .. cid) == false then
  return redis.error_reply('PRESENCE unknown connection')
end
for _, r in ipairs(rooms) do if r == room then return transitions() end end
local first = not in_room(u, room)
rooms[#rooms + 1] = room
save_user(uk, u, true)
if first and u.st ~= 'invisible' and room_add(uid, room) then
  local until_ = until_of(uid, num(redis.call('ZSCORE', K_SEEN, uid)))
  emit('join', uid, room, public_state(u, until_), NOW, u)
end
return transitions()
