-- leave(user, conn, room): the connection leaves a room; the room hears of it when this was the
-- user's last connection there.
local uid, cid, room = ARGV[A], ARGV[A + 1], ARGV[A + 2]
local uk = ukey(uid)
local field = redis.call('HGET', uk, 'c:' .. cid)
if field == false then return OUT end
local rooms, kept, found = cjson.decode(field), {}, false
for _, r in ipairs(rooms) do
  if r == room then found = true else kept[#kept + 1] = r end
end
if not found then return OUT end
redis.call('HSET', uk, 'c:' .. cid, cjson.encode(kept))
if redis.call('HINCRBY', uk, 'r:' .. room, -1) <= 0 then
  redis.call('HDEL', uk, 'r:' .. room)
  local u = hgetall(uk)
  if room_remove(uid, room) then
    emit('leave', uid, room, public_state(u, num(redis.call('ZSCORE', K_ONLINE, uid))), NOW, u)
  end
end
return OUT
