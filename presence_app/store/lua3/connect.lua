-- connect(user, conn, device): a WebSocket opened on this process. A plain user's one connection
-- goes into the registry; a second one (or rooms) moves them into the record. Counts as activity.
local uid, cid, device = ARGV[A], ARGV[A + 1], ARGV[A + 2]
renew_proc()
local uk = ukey(uid)
local u = decode(redis.call('GET', uk))
local idx = index_of(u.st)
local listed = redis.call('ZSCORE', idx, uid) ~= false
local conns = live_conns(uid, u, listed)
conns[cid] = {PROC}
if device ~= '' then u.dev = device end
keep_conns(uid, u, uk, conns, sc(NOW), true)
redis.call('ZADD', idx, 'GT', sc(NOW), uid)
redis.call('ZREM', K_UNTIL, uid)  -- a reload within the grace: it ends here
schedule_graces(uid, conns)
if idx == K_SEEN and not listed then emit('online', uid, nil, public_state(u), NOW, u, NONE) end
return transitions()
