-- forget(user): erasure. Ends the user's presence as the sweep does (their rooms are left and,
-- when the public saw them online, they go offline: both announced), then deletes everything
-- the store keeps of them: their record, their leases, their place in every index and room.
local uid = ARGV[A]
local u, uk = load_user(uid)
local seen = redis.call('ZSCORE', K_SEEN, uid)
local hidden = redis.call('ZSCORE', K_HIDDEN, uid)
evict(uid, u, uk, seen and K_SEEN or K_HIDDEN, seen or hidden, false)
if seen then emit('offline', uid, nil, 'offline', NOW, u, NONE) end
redis.call('ZREM', K_SEEN, uid)
redis.call('ZREM', K_HIDDEN, uid)
redis.call('DEL', uk)
return transitions()
