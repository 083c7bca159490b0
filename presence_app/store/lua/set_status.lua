-- set_status(user, state, updates): 'auto' | 'dnd' | 'invisible' ('' keeps it) and the fields in
-- updates (JSON: msg, emoji, dev, meta, mx or mx+ (seconds from now); null deletes). Going invisible reads to the public as
-- leaving every room and going offline; coming back, as online and joining them again.
local uid, state, updates = ARGV[A], ARGV[A + 1], cjson.decode(ARGV[A + 2])
local uk = ukey(uid)
local u = hgetall(uk)
local old_idx = index_of(u.st)
local until_ = num(redis.call('ZSCORE', old_idx, uid))
local before = public_state(u, until_) .. '\n' .. (live_message(u, 'msg') or '') .. '\n' .. (live_message(u, 'emoji') or '')
if state == 'auto' then
  redis.call('HDEL', uk, 'st'); u.st = nil
elseif state ~= '' then
  redis.call('HSET', uk, 'st', state); u.st = state
end
for f, v in pairs(updates) do
  if f == 'mx+' then f, v = 'mx', NOW + v end  -- an expiry given as seconds from now
  if v == cjson.null then redis.call('HDEL', uk, f); u[f] = nil else redis.call('HSET', uk, f, v); u[f] = v end
end
local new_idx = index_of(u.st)
local live = until_ ~= nil and until_ >= NOW

if new_idx == K_HIDDEN and old_idx == K_ONLINE then
  -- Frozen public last seen: what the others saw last.
  local seen = live and NOW or math.max(num(u.ls) or 0, (until_ or 0) - LEASE_TTL)
  -- Nothing known (Redis lost it, e.g. a restart): no last seen, rather than one of 1970.
  if seen > 0 then redis.call('HSET', uk, 'lv', seen) else redis.call('HDEL', uk, 'lv') end
  if until_ ~= nil then
    for _, room in ipairs(rooms_of(u)) do
      if room_remove(uid, room) then emit('leave', uid, room, 'offline', NOW, u) end
    end
    redis.call('ZREM', K_ONLINE, uid)
    redis.call('ZADD', K_HIDDEN, until_, uid)
    emit('offline', uid, nil, 'offline', seen, u, {})
  end
elseif new_idx == K_ONLINE and old_idx == K_HIDDEN then
  redis.call('HDEL', uk, 'lv')
  if until_ ~= nil then
    redis.call('ZREM', K_HIDDEN, uid)
    if not live then
      -- Expired while hidden and not swept yet: finish them off silently here, so that no
      -- lease outlives the user's listing (a late heartbeat then reports it missing).
      for f, _ in pairs(u) do
        if string.sub(f, 1, 2) == 'c:' then drop_connection(uid, string.sub(f, 3), uk, u) end
      end
      redis.call('HSET', uk, 'ls', math.max(num(u.ls) or 0, until_ - LEASE_TTL))
      redis.call('ZREM', K_ACTIVE, uid)
    else
      redis.call('ZADD', K_ONLINE, until_, uid)
      local rooms = rooms_of(u)
      emit('online', uid, nil, public_state(u, until_), NOW, u, rooms)
      for _, room in ipairs(rooms) do
        if room_add(uid, room) then emit('join', uid, room, public_state(u, until_), NOW, u) end
      end
    end
  end
elseif new_idx == K_ONLINE and live then
  local after = public_state(u, until_) .. '\n' .. (live_message(u, 'msg') or '') .. '\n' .. (live_message(u, 'emoji') or '')
  if after ~= before then emit('update', uid, nil, public_state(u, until_), NOW, u, rooms_of(u)) end
end
keep_user(uk, redis.call('ZSCORE', index_of(u.st), uid) ~= false)
return OUT
