-- set_status(user, state, updates): 'auto' | 'dnd' | 'invisible' ('' keeps it) and the fields in
-- updates (JSON: msg, emoji, dev, meta, mx or mx+ (seconds from now); null deletes). Going
-- invisible reads to the public as leaving every room and going offline; coming back, as online
-- and joining them again.
local uid, state, updates = ARGV[A], ARGV[A + 1], cjson.decode(ARGV[A + 2])
local u, uk = load_user(uid)
local old_idx = index_of(u.st)
local seen = num(redis.call('ZSCORE', old_idx, uid))
local until_ = until_of(uid, seen)
local function shown() return public_state(u, until_) .. '\n' .. (live_message(u, 'msg') or '') .. '\n' .. (live_message(u, 'emoji') or '') end
local before = shown()
if state == 'auto' then u.st = nil elseif state ~= '' then u.st = state end
for f, v in pairs(updates) do
  if f == 'mx+' then f, v = 'mx', sc(NOW + v) end  -- an expiry given as seconds from now
  if v == cjson.null then u[f] = nil else u[f] = v end
end
local new_idx = index_of(u.st)
local live = until_ ~= nil and until_ >= NOW
local listed = seen ~= nil

if new_idx == K_HIDDEN and old_idx == K_SEEN then
  -- Frozen public last seen: what the others saw last.
  local last = live and NOW or math.max(num(u.ls) or 0, seen or 0)
  -- Nothing known (Redis lost it, e.g. a restart): no last seen, rather than one of 1970.
  if last > 0 then u.lv = sc(last) else u.lv = nil end
  if listed then
    for _, room in ipairs(rooms_of(u)) do
      if room_remove(uid, room) then emit('leave', uid, room, 'offline', NOW, u) end
    end
    redis.call('ZREM', K_SEEN, uid)
    redis.call('ZADD', K_HIDDEN, sc(seen), uid)
    emit('offline', uid, nil, 'offline', last, u, {})
  end
elseif new_idx == K_SEEN and old_idx == K_HIDDEN then
  u.lv = nil
  if listed then
    if not live then
      -- Expired while hidden and not swept yet: finish them off silently here, so that no
      -- lease outlives the user's listing (a late heartbeat then reports it missing).
      evict(uid, u, uk, K_HIDDEN, seen)
      return transitions()
    end
    redis.call('ZREM', K_HIDDEN, uid)
    redis.call('ZADD', K_SEEN, sc(seen), uid)
    local rooms = rooms_of(u)
    emit('online', uid, nil, public_state(u, until_), NOW, u, rooms)
    for _, room in ipairs(rooms) do
      if room_add(uid, room) then emit('join', uid, room, public_state(u, until_), NOW, u) end
    end
  end
elseif new_idx == K_SEEN and live then
  if shown() ~= before then emit('update', uid, nil, public_state(u, until_), NOW, u, rooms_of(u)) end
end
save_user(uk, u, listed)
return transitions()
