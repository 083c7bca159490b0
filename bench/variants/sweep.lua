-- VARIANT of presence_app/store/lua/sweep.lua (bench/variants: measured by bench.experiments).
-- Same contract, same transitions for each user, same end state. Changes, all in pass 1:
--  * the lease scores come with ZRANGEBYSCORE ... WITHSCORES: no ZSCORE per lease;
--  * the expired leases leave the set in one ZREM per batch, not one ZREM each;
--  * a user whose expired lease was their last hold on presence (no other live lease, no HTTP
--    window) is evicted right there, from the hash already read, instead of being read again by
--    pass 2; their index entries leave in one ZREM per index per batch;
--  * one HDEL per user for the connection field and the 'w'/'idle' fields.
-- Pass 2 is batched likewise (below). So a plain expired user costs HGETALL + HDEL + HSET (+ a shared ZREM/ZMSCORE) instead of
-- HGETALL, ZSCORE, ZREM, HDEL, HSET, HGETALL, HSET, HDEL, ZREM, ZREM. Passes 2 and 3 are as before.
-- Transitions of one user keep their order (leaves, then offline); across users, an offline can
-- now come before another user's leave of the same batch.
local limit = tonumber(ARGV[A])
local more = 0
local find = string.find
local function ukey_fast(uid)
  if find(uid, '[^%w%-%._~]') then return ukey(uid) end
  return TAG .. ':u:' .. uid
end

-- emit() for an offline with nothing to carry (no live message or emoji, no rooms): its extra
-- is the constant cjson.encode({rooms = {}}) makes, without encoding it each time.
local function emit_offline(uid, seen, u)
  if live_message(u, 'msg') == nil and live_message(u, 'emoji') == nil then
    OUT[#OUT + 1] = 'offline'; OUT[#OUT + 1] = uid; OUT[#OUT + 1] = ''
    OUT[#OUT + 1] = 'offline'; OUT[#OUT + 1] = fmt(seen); OUT[#OUT + 1] = '{"rooms":{}}'
  else
    emit('offline', uid, nil, 'offline', seen, u, {})
  end
end

local function zrem_all(key, members)
  for first = 1, #members, 1000 do
    redis.call('ZREM', key, unpack(members, first, math.min(first + 999, #members)))
  end
end

local expired = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', '(' .. NOW, 'WITHSCORES', 'LIMIT', 0, limit)
if #expired >= 2 * limit then more = 1 end
if #expired > 0 then
  local members, users, cids = {}, {}, {}
  for i = 1, #expired, 2 do members[#members + 1] = expired[i] end
  zrem_all(K_LEASES, members)
  local latest = {}  -- a user's latest expired lease of this batch
  for i = 1, #members do
    local uid, cid = split_member(members[i]); users[i] = uid; cids[i] = cid
    local exp = num(expired[2 * i])
    if latest[uid] == nil or exp > latest[uid] then latest[uid] = exp end
  end
  local listed = {}
  for first = 1, #users, 1000 do
    local last = math.min(first + 999, #users)
    local scores = redis.call('ZMSCORE', K_ONLINE, unpack(users, first, last))
    for j = first, last do listed[j] = scores[j - first + 1] end
  end
  local gone_online, gone_hidden, gone_active, evicted = {}, {}, {}, {}
  local function one(i)
    local uid, cid = users[i], cids[i]
    local exp = num(expired[2 * i])
    if evicted[uid] then return end  -- its eviction dropped this connection too
    local uk = ukey_fast(uid)
    local u = hgetall(uk)
    local field = u['c:' .. cid]
    if field ~= nil then
      -- drop_connection without its ZSCORE and ZREM (done above for the batch)
      if field ~= '[]' then
        for _, room in ipairs(cjson.decode(field)) do
          local left = redis.call('HINCRBY', uk, 'r:' .. room, -1)
          if left <= 0 then
            redis.call('HDEL', uk, 'r:' .. room)
            u['r:' .. room] = nil
            if room_remove(uid, room) then
              local idx_score
              if u.st == 'invisible' then idx_score = nil else idx_score = num(listed[i]) end
              emit('leave', uid, room, public_state(u, idx_score), NOW, u)
            end
          else
            u['r:' .. room] = tostring(left)
          end
        end
      end
      u['c:' .. cid] = nil
    end
    local seen = math.max(num(u.ls) or 0, exp - LEASE_TTL)
    -- Evict the user now when nothing else keeps them: the check pass 2 would make.
    local idx, until_ = K_ONLINE, num(listed[i])
    if u.st == 'invisible' then idx = K_HIDDEN; until_ = num(redis.call('ZSCORE', K_HIDDEN, uid)) end
    local evict = false
    if until_ ~= nil and until_ < NOW and next(u) ~= nil then
      local still = recompute_until(uid, u)
      evict = still < NOW
    end
    if evict then
      -- pass 2's eviction of this user, with the hash read above
      for f, _ in pairs(u) do
        if string.sub(f, 1, 2) == 'c:' then drop_connection(uid, string.sub(f, 3), uk, u) end
      end
      seen = math.max(seen, latest[uid] - LEASE_TTL, until_ - LEASE_TTL)
      evicted[uid] = true
      redis.call('HDEL', uk, 'c:' .. cid, 'w', 'idle')
      redis.call('HSET', uk, 'ls', seen)
      if idx == K_ONLINE then gone_online[#gone_online + 1] = uid else gone_hidden[#gone_hidden + 1] = uid end
      gone_active[#gone_active + 1] = uid
      keep_user(uk, false)
      if idx == K_ONLINE then emit_offline(uid, seen, u) end
    else
      if field ~= nil then redis.call('HDEL', uk, 'c:' .. cid) end
      redis.call('HSET', uk, 'ls', seen)
    end
  end
  for i = 1, #members do one(i) end
  zrem_all(K_ONLINE, gone_online)
  zrem_all(K_HIDDEN, gone_hidden)
  zrem_all(K_ACTIVE, gone_active)
end

-- Pass 2, batched the same way: the users' hashes are read once, their connections' leases in
-- one ZMSCORE, and the leases, index and active entries of the evicted leave in one ZREM each.
local function expire_users(idx)
  local gone = redis.call('ZRANGEBYSCORE', idx, '-inf', '(' .. NOW, 'WITHSCORES', 'LIMIT', 0, limit)
  if #gone >= 2 * limit then more = 1 end
  if #gone == 0 then return end
  local users, hashes, conns = {}, {}, {}
  for i = 1, #gone, 2 do
    local uid = gone[i]
    local u = hgetall(ukey_fast(uid))
    users[#users + 1] = uid; hashes[#hashes + 1] = u
    for f, _ in pairs(u) do
      if string.sub(f, 1, 2) == 'c:' then conns[#conns + 1] = uid .. '|' .. string.sub(f, 3) end
    end
  end
  local lease = {}
  for first = 1, #conns, 1000 do
    local last = math.min(first + 999, #conns)
    local scores = redis.call('ZMSCORE', K_LEASES, unpack(conns, first, last))
    for j = first, last do lease[conns[j]] = num(scores[j - first + 1]) end
  end
  local drop_leases, drop_idx, drop_active = {}, {}, {}
  for k, uid in ipairs(users) do
    local u, until_ = hashes[k], num(gone[2 * k])
    local uk = ukey_fast(uid)
    local still = num(u.w) or 0
    for f, _ in pairs(u) do
      if string.sub(f, 1, 2) == 'c:' then
        local exp = lease[uid .. '|' .. string.sub(f, 3)]
        if exp and exp > still then still = exp end
      end
    end
    if still >= NOW then
      redis.call('ZADD', idx, still, uid)  -- a lease outlived the index entry: keep the user
    else
      local fields = {}
      for f, v in pairs(u) do
        if string.sub(f, 1, 2) == 'c:' then
          local member = uid .. '|' .. string.sub(f, 3)
          if lease[member] then drop_leases[#drop_leases + 1] = member end
          fields[#fields + 1] = f
          if v ~= '[]' then  -- drop_connection's rooms part
            for _, room in ipairs(cjson.decode(v)) do
              local left = redis.call('HINCRBY', uk, 'r:' .. room, -1)
              if left <= 0 then
                redis.call('HDEL', uk, 'r:' .. room)
                u['r:' .. room] = nil
                if room_remove(uid, room) then
                  emit('leave', uid, room, public_state(u, num(redis.call('ZSCORE', K_ONLINE, uid))), NOW, u)
                end
              else
                u['r:' .. room] = tostring(left)
              end
            end
          end
        end
      end
      for _, f in ipairs(fields) do u[f] = nil end
      local seen = math.max(num(u.ls) or 0, until_ - LEASE_TTL)
      fields[#fields + 1] = 'w'; fields[#fields + 1] = 'idle'
      redis.call('HDEL', uk, unpack(fields))
      redis.call('HSET', uk, 'ls', seen)
      drop_idx[#drop_idx + 1] = uid; drop_active[#drop_active + 1] = uid
      keep_user(uk, false)
      if idx == K_ONLINE then emit_offline(uid, seen, u) end
    end
  end
  zrem_all(K_LEASES, drop_leases)
  zrem_all(idx, drop_idx)
  zrem_all(K_ACTIVE, drop_active)
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
