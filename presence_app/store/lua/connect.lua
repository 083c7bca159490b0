-- connect(user, conn, device): a WebSocket opened. Takes a lease and counts as activity.
local uid, cid, device = ARGV[A], ARGV[A + 1], ARGV[A + 2]
local u, uk = load_user(uid)
local idx = index_of(u.st)
local seen = num(redis.call('ZSCORE', idx, uid))
local exp = NOW + LEASE_TTL
redis.call('ZADD', K_LEASES, sc(exp), uid .. '|' .. cid)
local conns = conns_of(u)
if conns[cid] == nil then conns[cid] = {} end
if device ~= '' then u.dev = device end
local until_ = math.max(until_of(uid, seen) or exp, exp)
set_until(uid, seen_now(idx, uid, seen), until_)
local was_idle = mark_active(uid, u)
save_user(uk, u, true)
if idx == K_SEEN then announce_life(uid, u, seen ~= nil, was_idle, until_) end
return transitions()
