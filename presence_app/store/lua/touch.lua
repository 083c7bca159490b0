-- touch(user, activity, user, activity, ...): HTTP requests (or other signs of life), one user
-- after the other (the middleware's batches). A connected user's touch is a sign of life (and,
-- with activity, their activity); a user with no connection is listed in K_SEEN by their last
-- request negated (WEB, head.lua), online for ONLINE_WINDOW: one entry, and no record while every
-- request is activity.
-- A request without activity of a user whose last activity is IDLE_AFTER old announces idle.
-- A connected user's request: with `activity` their last activity, and `window` (the request's
-- window end, while a connection holds them) for when that connection closes: in the registry
-- field for a plain user, the record otherwise.
-- The common case answered here, before the rest of the library's definitions are made (issue
-- 43, as join.lua's): a visible user whose score is a connection's (positive), every connection
-- of whose record is live (or whose registry field is live), whose record carries a copy (or
-- who has none, their connection in the field), and whose touch announces nothing (no idle
-- user's activity). The full path below would then write what this part writes: their score
-- (GT), their K_UNTIL end when there is one (or ONLINE_WINDOW > LEASE_TTL), their window end and
-- last activity (the record's, or the field's for a plain user) and the record's copy (not
-- its K_COPIES entry: the record had a copy). The users are taken in order; the first that is
-- not such a one goes down the full path with what was read of it (its record and score:
-- PRE_RAW, PRE_S), and so do all after it.
local EARLY = true
local FIRST, PRE_READ, PRE_RAW, PRE_S = A, false, nil, nil  -- the first user left to the full path
local TOUCHED = '^([^\31]*)\31([^\31]*)\31([^\31]*\31[^\31]*\31[^\31]*\31[^\31]*\31[^\31]*\31'
  .. '[^\31]*\31[^\31]*)\31([^\31]*)\31([^\31]*)\31([^\31]*)\31(.*)$'
while EARLY and FIRST <= #ARGV do
  local uid, activity = ARGV[FIRST], ARGV[FIRST + 1] == '1'
  if not erased(uid) then
    local raw = redis.call('HGET', K_RECS, uid)
    local st, la, mid, w, idle, conns, cp = '', '', nil, nil, '', '', nil
    if raw then st, la, mid, w, idle, conns, cp = string.match(raw, TOUCHED) end
    local s = nil
    if st ~= 'invisible' and (not raw or (mid and #cp == COPY_WIDTH)) then
      s = tonumber(redis.call('ZSCORE', K_SEEN, uid)) or false
    end
    PRE_READ, PRE_RAW, PRE_S = true, raw, s
    if not (s and s > 0) or (activity and idle == '1') then break end
    local p, c, fla = nil, nil, nil  -- the registry field (a plain user's connection)
    local any = false  -- a live connection of the user's
    if conns ~= '' then
      for _, e in pairs(cjson.decode(conns)) do any = any or proc_alive(e[1]) end
    else
      p, c, fla = registry_of(uid)
      any = registry_live(uid, p, fla)
    end
    if not any then break end
    redis.call('ZADD', K_SEEN, 'GT', sc(NOW), uid)
    local e = tonumber(redis.call('ZSCORE', K_UNTIL, uid))
    if e or WINDOW > SPAN then redis.call('ZADD', K_UNTIL, sc(math.max(e or 0, NOW + WINDOW)), uid) end
    local window = sc(NOW + WINDOW)
    if p then
      registry_set(uid, p, c, activity and sc(NOW) or fla, window)  -- (the record as it stands)
    else
      if activity then la, idle = sc(NOW), '' elseif la == '' then la = sc(NOW) end
      local body = st .. '\31' .. la .. '\31' .. mid .. '\31' .. window .. '\31' .. idle .. '\31'
        .. conns .. '\31'
      if body .. cp ~= raw then redis.call('HSET', K_RECS, uid, body .. copy_of(math.max(s, NOW))) end
    end
    PRE_READ, PRE_RAW, PRE_S = false, nil, nil
  end
  FIRST = FIRST + 2
end
if FIRST > #ARGV then return '' end  -- every user's touch done here: nothing announced
-- (the library)
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
-- (read: the early part read the user (not erased), their record `pre` and, when not nil,
-- their K_SEEN score `pre_s`: false where there is none)
local function touch_one(uid, activity, read, pre, pre_s)
  local u, s
  if read then
    u = user_of(uid, pre)
  else
    if erased(uid) then return end
    u = load_user(uid)
  end
  local idx = index_of(u.st)
  if pre_s ~= nil and idx == K_SEEN then s = pre_s or nil else s = num(redis.call('ZSCORE', idx, uid)) end
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
for i = FIRST, #ARGV, 2 do
  if i == FIRST then touch_one(ARGV[i], ARGV[i + 1] == '1', PRE_READ, PRE_RAW, PRE_S)
  else touch_one(ARGV[i], ARGV[i + 1] == '1') end
end
return transitions()
