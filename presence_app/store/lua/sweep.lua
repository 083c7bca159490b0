-- sweep(limit): evicts what expired, announcing it. Three passes, each at most `limit` items:
-- 1. expired leases (crashed processes, ended graces): the connection's rooms are left, and a
--    user with nothing else holding them (another lease, an HTTP window) goes offline there;
-- 2. users whose presence ran out otherwise (HTTP windows, ends in K_UNTIL);
-- 3. users with no activity for IDLE_AFTER: announced idle once.
-- Returns {more, transitions}: more = 1 when a pass hit its limit.
local limit = tonumber(ARGV[A])
local more = 0

-- Removes members from a sorted set, at most 1,000 arguments a call.
local function zrem(key, members)
  for first = 1, #members, 1000 do
    redis.call('ZREM', key, unpack(members, first, math.min(first + 999, #members)))
  end
end

-- Users to take out of the indexes, removed in one call per index at the end of a pass.
local gone = {[K_SEEN] = {}, [K_HIDDEN] = {}}
local function flush_gone()
  local all = {}
  for idx, uids in pairs(gone) do
    zrem(idx, uids)
    for _, uid in ipairs(uids) do all[#all + 1] = uid end
    gone[idx] = {}
  end
  zrem(K_UNTIL, all)
  zrem(K_ACTIVE, all)
end

-- Offline now: evicted, and announced when visible. `seen` may be Redis' text of the score.
local function offline(uid, u, uk, idx, seen)
  local last = evict(uid, u, uk, idx, seen, true)
  local list = gone[idx]
  list[#list + 1] = uid
  if idx == K_SEEN then emit('offline', uid, nil, 'offline', u.ls or last, u, NONE) end
end

-- Pass 1. The expired leases leave in one call; their users are read once each. Kept in flat
-- tables keyed by user (most have one lease here): no table per user.
local expired = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', '(' .. sc(NOW), 'WITHSCORES', 'LIMIT', 0, limit)
if #expired >= 2 * limit then more = 1 end
local order, first_cid, other_cids, renewed = {}, {}, {}, {}
for i = 1, #expired, 2 do
  local uid, cid = split_member(expired[i])
  -- the lease's last renewal is a sign of life of the user
  local r = num(expired[i + 1]) - LEASE_TTL
  if first_cid[uid] == nil then
    first_cid[uid], renewed[uid] = cid, r
    order[#order + 1] = uid
  else
    local others = other_cids[uid] or {}
    others[#others + 1] = cid
    other_cids[uid] = others
    if r > renewed[uid] then renewed[uid] = r end
  end
end
-- they are the set's first members: removed by rank, without a lookup each
if #expired > 0 then redis.call('ZREMRANGEBYRANK', K_LEASES, 0, #expired / 2 - 1) end
if #order > 0 then
  local records, keys = load_users(order)
  local seen = redis.call('ZMSCORE', K_SEEN, unpack(order))
  for n, uid in ipairs(order) do
    local u, uk = records[n], keys[n]
    local left = forget_connection(u, first_cid[uid])
    for _, cid in ipairs(other_cids[uid] or NONE) do
      for _, room in ipairs(forget_connection(u, cid)) do
        if left == NONE then left = {} end
        left[#left + 1] = room
      end
    end
    local idx = index_of(u.st)
    local s = seen[n] or nil  -- Redis' nil is false in Lua
    if idx == K_HIDDEN then s = redis.call('ZSCORE', K_HIDDEN, uid) or nil end
    local still = recompute_until(uid, u)
    local r = renewed[uid]
    if still >= NOW then
      if r > (num(u.ls) or 0) then u.ls = sc(r) end
      leave_rooms(uid, left, public_state(u, still), u)
      save_user(uk, u, s ~= nil)
    else
      leave_rooms(uid, left, 'offline', u)
      if not s or num(s) < r then s = r end
      offline(uid, u, uk, idx, s)
    end
  end
end
flush_gone()
-- More expired leases to come: the next call goes on with them first, so that pass 2 does not
-- reach users whose leases pass 1 would evict in bulk.
if more == 1 then return {more, transitions()} end

-- Pass 2. Users whose presence ended without a lease expiring here: an end in K_UNTIL that is
-- past, or a seen score more than SPAN ago (both indexes).
local candidates, seen_of = {}, {}
local function add(uid, score)
  if seen_of[uid] == nil then candidates[#candidates + 1] = uid; seen_of[uid] = score or false end
end
local ended = redis.call('ZRANGEBYSCORE', K_UNTIL, '-inf', '(' .. sc(NOW), 'LIMIT', 0, limit)
if #ended >= limit then more = 1 end
for _, uid in ipairs(ended) do add(uid) end
for _, idx in ipairs({K_SEEN, K_HIDDEN}) do
  local old = redis.call('ZRANGEBYSCORE', idx, '-inf', '(' .. sc(NOW - SPAN), 'WITHSCORES', 'LIMIT', 0, limit)
  if #old >= 2 * limit then more = 1 end
  for i = 1, #old, 2 do add(old[i], num(old[i + 1])) end
end
for _, uid in ipairs(candidates) do
  local u, uk = load_user(uid)
  local idx = index_of(u.st)
  local s = seen_of[uid] or num(redis.call('ZSCORE', idx, uid))
  if s == nil then
    redis.call('ZREM', K_UNTIL, uid)  -- not listed: nothing to end
  else
    local still = recompute_until(uid, u)
    if still >= NOW then
      set_until(uid, s, still)  -- a lease outlived the recorded end: keep the user
    else
      offline(uid, u, uk, idx, s)
    end
  end
end
flush_gone()

-- Pass 3. Idle announcements.
local idle = redis.call('ZRANGEBYSCORE', K_ACTIVE, '-inf', sc(NOW - IDLE_AFTER), 'LIMIT', 0, limit)
if #idle >= limit then more = 1 end
zrem(K_ACTIVE, idle)
for _, uid in ipairs(idle) do
  local uk = ukey(uid)
  local raw = redis.call('GET', uk)
  local u = decode(raw)
  if raw and u.idle ~= '1' then
    u.idle = '1'
    local seen = num(redis.call('ZSCORE', index_of(u.st), uid))
    save_user(uk, u, seen ~= nil)
    local until_ = until_of(uid, seen)
    if until_ and until_ >= NOW and u.st ~= 'dnd' and u.st ~= 'invisible' then
      emit('update', uid, nil, public_state(u, until_), NOW, u, rooms_of(u))
    end
  end
end
return {more, transitions()}
