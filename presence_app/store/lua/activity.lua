-- activity(user): the person did something on a live connection. Resets the idle clock only:
-- the connection's lease, not an HTTP window, keeps them online (so closing the last tab
-- still ends their presence after the grace). Unlisted users are left alone.
local uid = ARGV[A]
local uk = ukey(uid)
local u = hgetall(uk)
local idx = index_of(u.st)
local until_ = num(redis.call('ZSCORE', idx, uid))
if until_ == nil then return OUT end
local was_idle = mark_active(uid, uk, u)
if idx == K_ONLINE then announce_life(uid, u, true, was_idle, until_) end
return OUT
