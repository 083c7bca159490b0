-- connect(user, conn, device): a WebSocket opened. Takes a lease and counts as activity.
local uid, cid, device = ARGV[A], ARGV[A + 1], ARGV[A + 2]
local uk = ukey(uid)
local u = hgetall(uk)
local idx = index_of(u.st)
local listed = redis.call('ZSCORE', idx, uid) ~= false
local exp = NOW + LEASE_TTL
redis.call('ZADD', K_LEASES, exp, uid .. '|' .. cid)
if u['c:' .. cid] == nil then redis.call('HSET', uk, 'c:' .. cid, '[]') end
if device ~= '' then redis.call('HSET', uk, 'dev', device) end
redis.call('ZADD', idx, 'GT', exp, uid)
local was_idle = mark_active(uid, uk, u)
keep_user(uk, true)
if idx == K_ONLINE then announce_life(uid, u, listed, was_idle, exp) end
return OUT
