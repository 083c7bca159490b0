-- sweep(limit): evicts what expired, announcing it. Three passes, each at most `limit` items:
-- 1. expired leases (crashed processes, ended graces): the connection's rooms are left;
-- 2. users whose last lease and HTTP window ran out: offline, with their last seen kept;
-- 3. users with no activity for IDLE_AFTER: announced idle once.
-- Returns {more, transitions}: more = 1 when a pass hit its limit.
local limit = tonumber(ARGV[A])
local more = 0

local expired = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', '(' .. NOW, 'WITHSCORES', 'LIMIT', 0, limit)
if #expired >= 2 * limit then more = 1 end
for i = 1, #expired, 2 do
  local uid, cid = split_member(expired[i])
  local uk = ukey(uid)
  local u = hgetall(uk)
  local exp = drop_connection(uid, cid, uk, u)
  if exp then
    local seen = math.max(num(u.ls) or 0, exp - LEASE_TTL)
    redis.call('HSET', uk, 'ls', seen)
  end
end

local function expire_users(idx)
  local gone = redis.call('ZRANGEBYSCORE', idx, '-inf', '(' .. NOW, 'WITHSCORES', 'LIMIT', 0, limit)
  if #gone >= 2 * limit then more = 1 end
  for i = 1, #gone, 2 do
    local uid, until_ = gone[i], num(gone[i + 1])
    local uk = ukey(uid)
    local u = hgetall(uk)
    local still = recompute_until(uid, u)
    if still >= NOW then
      redis.call('ZADD', idx, still, uid)  -- a lease outlived the index entry: keep the user
    else
      for f, _ in pairs(u) do
        if string.sub(f, 1, 2) == 'c:' then drop_connection(uid, string.sub(f, 3), uk, u) end
      end
      local seen = math.max(num(u.ls) or 0, until_ - LEASE_TTL)
      redis.call('HSET', uk, 'ls', seen)
      redis.call('HDEL', uk, 'w', 'idle')
      redis.call('ZREM', idx, uid)
      redis.call('ZREM', K_ACTIVE, uid)
      keep_user(uk, false)
      if idx == K_ONLINE then emit('offline', uid, nil, 'offline', seen, u, {}) end
    end
  end
end
expire_users(K_ONLINE)
expire_users(K_HIDDEN)

local idle = redis.call('ZRANGEBYSCORE', K_ACTIVE, '-inf', NOW - IDLE_AFTER, 'LIMIT', 0, limit)
if #idle >= limit then more = 1 end
for _, uid in ipairs(idle) do
  redis.call('ZREM', K_ACTIVE, uid)
  local uk = ukey(uid)
  local u = hgetall(uk)
  local until_ = num(redis.call('ZSCORE', K_ONLINE, uid))
  if u.idle ~= '1' and next(u) ~= nil then
    redis.call('HSET', uk, 'idle', '1')
    if until_ and until_ >= NOW and u.st ~= 'dnd' and u.st ~= 'invisible' then
      emit('update', uid, nil, public_state(u, until_), NOW, u, rooms_of(u))
    end
  end
end
return {more, OUT}
