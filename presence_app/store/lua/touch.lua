-- touch(user, activity, user, activity, ...): HTTP requests (or other signs of life), one user
-- after the other, in one call (the middleware's batches). Each user is online for
-- ONLINE_WINDOW; with activity, their idle clock is also reset.
local function touch_one(uid, activity)
  local u, uk = load_user(uid)
  local idx = index_of(u.st)
  local seen = num(redis.call('ZSCORE', idx, uid))
  local w = NOW + WINDOW
  u.ls = sc(NOW); u.w = sc(w)
  local until_ = math.max(until_of(uid, seen) or w, w)
  set_until(uid, seen_now(idx, uid, seen), until_)
  local was_idle = false
  if activity then
    was_idle = mark_active(uid, u)
  elseif seen == nil then
    -- A first sign of life without activity still starts the idle clock.
    if u.la == nil then mark_active(uid, u) else redis.call('ZADD', K_ACTIVE, 'NX', u.la, uid) end
  end
  save_user(uk, u, true)
  if idx == K_SEEN then announce_life(uid, u, seen ~= nil, was_idle, until_) end
end
for i = A, #ARGV, 2 do touch_one(ARGV[i], ARGV[i + 1] == '1') end
return transitions()
