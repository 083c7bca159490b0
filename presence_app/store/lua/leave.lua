-- leave(user, conn, room): the connection leaves a room; the room hears of it when this was the
-- user's last connection there.
local uid, cid, room = ARGV[A], ARGV[A + 1], ARGV[A + 2]
local u, uk = load_user(uid)
local rooms = conns_of(u)[cid]
if rooms == nil then return transitions() end
local found = false
for i, r in ipairs(rooms) do
  if r == room then table.remove(rooms, i); found = true; break end
end
if not found then return transitions() end
save_user(uk, u, true)
if not in_room(u, room) and room_remove(uid, room) then
  local until_ = until_of(uid, num(redis.call('ZSCORE', K_SEEN, uid)))
  emit('leave', uid, room, public_state(u, until_), NOW, u)
end
return transitions()
