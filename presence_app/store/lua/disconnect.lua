-- disconnect(user, conn): a clean close. The lease is cut to the grace instead of dropped, so a
-- reload or a blip reconnects without a leave/join; the sweep announces what is left after it.
local uid, cid = ARGV[A], ARGV[A + 1]
local member = uid .. '|' .. cid
local exp = num(redis.call('ZSCORE', K_LEASES, member))
if exp == nil then return transitions() end
redis.call('ZADD', K_LEASES, 'XX', sc(math.min(exp, NOW + GRACE)), member)
local u, uk = load_user(uid)
u.ls = sc(NOW)
local seen = num(redis.call('ZSCORE', index_of(u.st), uid))
if seen then set_until(uid, seen, recompute_until(uid, u)) end
save_user(uk, u, seen ~= nil)
return transitions()
