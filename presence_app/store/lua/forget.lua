-- forget(user): erasure. The user's presence ends as the sweep ends it (the rooms of their
-- connections are left and, when the public saw them online, they go offline: both announced),
-- then everything the store keeps of them goes: their record, their registry field, their place
-- in every index and process set, their graces and their entries in their rooms' live state
-- (matched exactly: a field is "user|public id", and a user id may itself hold a '|'). For HOLD
-- after it, no write of theirs is taken (lib.lua's erased).
local uid = ARGV[A]
redis.call('ZREMRANGEBYSCORE', K_GONE, '-inf', sc(NOW))
redis.call('ZADD', K_GONE, sc(NOW + HOLD), redis.sha1hex(uid))  -- no late write undoes it
redis.call('PEXPIRE', K_GONE, math.ceil(HOLD * 1000))
local u = decode(record(uid))
local shown = redis.call('ZSCORE', K_SEEN, uid)  -- (connected, or HTTP only: WEB)
for _, room in ipairs(rooms_in(conns_of(u))) do
  if room_remove(uid, room) then emit('leave', uid, room, 'offline', NOW, u) end
  local states = TAG .. ':rs:' .. esc(room)
  for _, field in ipairs(redis.call('HKEYS', states)) do
    if split_member(field) == uid then redis.call('HDEL', states, field) end
  end
end
if shown then emit('offline', uid, nil, 'offline', NOW, u, NONE) end
for _, e in pairs(conns_of(u)) do
  if string.sub(e[1], 1, 1) ~= '~' then redis.call('SREM', pkey(e[1]), uid) end
end
registry_del(uid)
for _, idx in ipairs({K_SEEN, K_HIDDEN, K_UNTIL, K_GRACES, K_LAST}) do
  redis.call('ZREM', idx, uid)
end
drop_record(uid)
return transitions()
