-- online(mode, hidden, slack, offset, count): the users listed online (or, with hidden = 1, the
-- invisible ones) whose presence runs until at least now - slack: 'list' most recent first with
-- their scores, or 'count'. O(log N + count).
local mode, idx, since = ARGV[A], K_ONLINE, NOW - tonumber(ARGV[A + 2])
if ARGV[A + 1] == '1' then idx = K_HIDDEN end
if mode == 'count' then return redis.call('ZCOUNT', idx, since, '+inf') end
return redis.call('ZREVRANGEBYSCORE', idx, '+inf', since, 'WITHSCORES', 'LIMIT', ARGV[A + 3], ARGV[A + 4])
