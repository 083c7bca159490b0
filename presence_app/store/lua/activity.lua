-- activity(user): the person did something on a live connection. Resets the idle clock and is a
-- sign of life, and only that: the connection's lease, not an HTTP window, keeps them online (so
-- closing the last tab still ends their presence after the grace). Unlisted users are left alone.
local uid = ARGV[A]
local u, uk = load_user(uid)
local idx = index_of(u.st)
local seen = num(redis.call('ZSCORE', idx, uid))
if seen == nil then return transitions() end
local until_ = until_of(uid, seen)
local was_idle = mark_active(uid, u)
if until_ >= NOW then set_until(uid, seen_now(idx, uid, seen), until_) end
save_user(uk, u, true)
if idx == K_SEEN then announce_life(uid, u, true, was_idle, until_) end
return transitions()
