-- touch(user, activity): an HTTP request (or other sign of life). Online for ONLINE_WINDOW;
-- with activity, also resets the idle clock.
local uid, activity = ARGV[A], ARGV[A + 1] == '1'
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
return OUT
