-- disconnect(user, conn): a clean close. The lease is cut to the grace instead of dropped, so a
-- reload or a blip reconnects without a leave/join; the sweep announces what is left after it.
local uid, cid = ARGV[A], ARGV[A + 1]
local member = uid .. '|' .. cid
local exp = num(redis.call('ZSCORE', K_LEASES, member))
if exp == nil then return OUT end
local uk = ukey(uid)
redis.call('ZADD', K_LEASES, 'XX', math.min(exp, NOW + GRACE), member)
redis.call('HSET', uk, 'ls', NOW)
local u = hgetall(uk)
local idx = index_of(u.st)
if redis.call('ZSCORE', idx, uid) then
  redis.call('ZADD', idx, 'XX', recompute_until(uid, u), uid)
end
return OUT
