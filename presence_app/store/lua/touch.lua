-- touch(user, activity, user, activity, ...): HTTP requests (or other signs of life), one user
-- after the other, in one call (the middleware's batches). Each user is online for
-- ONLINE_WINDOW; with activity, their idle clock is also reset.
local function touch_one(uid, activity)
  local uk = ukey(uid)
  local u = hgetall(uk)
  local idx = index_of(u.st)
  local listed = redis.call('ZSCORE', idx, uid) ~= false
  local w = NOW + WINDOW
  redis.call('HSET', uk, 'ls', NOW, 'w', w)
  redis.call('ZADD', idx, 'GT', w, uid)
  local was_idle = false
  if activity then
    was_idle = mark_active(uid, uk, u)
  elseif not listed then
    -- A first sign of life without activity still starts the idle clock.
    if u.la == nil then mark_active(uid, uk, u) else redis.call('ZADD', K_ACTIVE, 'NX', num(u.la), uid) end
  end
  keep_user(uk, true)
  if idx == K_ONLINE then
    announce_life(uid, u, listed, was_idle, num(redis.call('ZSCORE', idx, uid)))
  end
end
for i = A, #ARGV, 2 do touch_one(ARGV[i], ARGV[i + 1] == '1') end
return OUT
