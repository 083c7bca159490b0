-- touch(user, activity, user, activity, ...): HTTP requests (or other signs of life), one user
-- after the other (the middleware's batches). A connected user's touch is a sign of life (and,
-- with activity, their activity); a user with no connection is listed in K_SEEN by their last
-- request negated (WEB, head.lua), online for ONLINE_WINDOW: one entry, and no record while every
-- request is activity.
-- A request without activity of a user whose last activity is IDLE_AFTER old announces idle.
-- A connected user's request: with `activity` their last activity, and `window` (the request's
-- window end, while a connection holds them) for when that connection closes: in the registry
-- field for a plain user, the record otherwise.
local function note(uid, u, activity, window)
  local p, c, la, w = registry_of(uid)
  if not registry_live(uid, p, la) then p = nil end
  local plain_conn = p and next(conns_of(u)) == nil
  if p then registry_set(uid, p, c, activity and sc(NOW) or la, window or w) end
  if activity then
    if plain_conn then u.la = nil else u.la = sc(NOW) end
  end
  if window and not plain_conn then u.w = window end
end
local function touch_one(uid, activity)
  if erased(uid) then return end
  local u = load_user(uid)
  local idx = index_of(u.st)
  local s = num(redis.call('ZSCORE', idx, uid))
  local was_idle = u.idle == '1'
  if idx == K_HIDDEN or (s and s > 0) then
    -- connected (or in a grace), or invisible: a sign of life in their index
    redis.call('ZADD', idx, 'GT', sc(NOW), uid)
    local conns = live_conns(uid, u, s ~= nil)
    local e = num(redis.call('ZSCORE', K_UNTIL, uid))
    local window = nil
    if e or next(conns) == nil or WINDOW > SPAN then
      -- no connection holds them (the window does), or the window outlasts what a connection
      -- holds (ONLINE_WINDOW > LEASE_TTL: a later end, which heartbeats keep)
      redis.call('ZADD', K_UNTIL, sc(math.max(e or 0, NOW + WINDOW)), uid)
    end
    if next(conns) ~= nil then  -- the window goes with the connection too (disconnect.lua)
      window = sc(NOW + WINDOW)
    end
    if activity or window then note(uid, u, activity, window) end
    if activity then u.idle = nil
    elseif not u.la and not registry_of(uid) then u.la = sc(NOW) end
    save_user(uid, u, true, idx == K_SEEN and math.max(s, NOW))
    if idx == K_SEEN and not s then emit('online', uid, nil, public_state(u), NOW, u, NONE)
    elseif idx == K_SEEN and was_idle and activity then
      emit('update', uid, nil, public_state(u), NOW, u, rooms_in(conns))
    end
    return
  end
  -- HTTP only: their web score negated in K_SEEN (LT: the later request wins)
  local w = s and sc(-s) or nil
  redis.call('ZADD', K_SEEN, 'LT', sc(-NOW), uid)
  if activity then
    -- the last activity is the web score itself: no record for it
    if u.la or u.idle then u.la = nil; u.idle = nil; save_user(uid, u, true, false) end
    if w and was_idle then emit('update', uid, nil, public_state(u), NOW, u, NONE) end
  else
    if not u.la then u.la = w or sc(NOW); save_user(uid, u, true, false) end
    if w and not was_idle and NOW - num(u.la) >= IDLE_AFTER then
      u.idle = '1'
      save_user(uid, u, true, false)
      emit('update', uid, nil, public_state(u), NOW, u, NONE)
    end
  end
  if not w then emit('online', uid, nil, public_state(u), NOW, u, NONE) end
end
for i = A, #ARGV, 2 do touch_one(ARGV[i], ARGV[i + 1] == '1') end
return transitions()
