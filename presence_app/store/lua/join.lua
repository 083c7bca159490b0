-- join(user, conn, room): the connection enters a room. The room hears of it only when this is
-- the user's first connection there (and the user is visible).
local uid, cid, room = ARGV[A], ARGV[A + 1], ARGV[A + 2]
local uk = ukey(uid)
local field = redis.call('HGET', uk, 'c:' .. cid)
if field == false or redis.call('ZSCORE', K_LEASES, uid .. '|' .. cid) == false then
  return redis.error_reply('PRESENCE unknown connection')
end
local rooms = cjson.decode(field)
for _, r in ipairs(rooms) do if r == room then return OUT end end
rooms[#rooms + 1] = room
redis.call('HSET', uk, 'c:' .. cid, cjson.encode(rooms))
if redis.call('HINCRBY', uk, 'r:' .. room, 1) == 1 then
  local u = hgetall(uk)
  if u.st ~= 'invisible' and room_add(uid, room) then
    emit('join', uid, room, public_state(u, num(redis.call('ZSCORE', K_ONLINE, uid))), NOW, u)
  end
end
return OUT
