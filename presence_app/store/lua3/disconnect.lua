-- disconnect(user, conn): a clean close. Another live connection left: nothing public. None
-- left: the grace (an end in K_UNTIL), which a reconnect within it clears and the sweep ends.
local uid, cid = ARGV[A], ARGV[A + 1]
renew_proc()
local uk = ukey(uid)
local u = decode(redis.call('GET', uk))
local idx = index_of(u.st)
local listed = redis.call('ZSCORE', idx, uid) ~= false
local p, c, la = registry_of(uid)
if not listed then
  if c == cid then redis.call('HDEL', bkey(uid), uid) end  -- what an eviction left behind
  return transitions()
end
local conns = live_conns(uid, u, true)
if conns[cid] == nil then return transitions() end
conns[cid] = nil
keep_conns(uid, u, uk, conns, la or u.la, true)
redis.call('ZADD', idx, 'GT', sc(NOW), uid)  -- the close is a sign of life
if next(conns) == nil then redis.call('ZADD', K_UNTIL, sc(NOW + GRACE), uid) end
return transitions()
