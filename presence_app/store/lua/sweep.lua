-- sweep(limit): ends what expired, announcing it. Passes of at most `limit` items each:
-- 1. dead processes (their lease ran out: kill -9): the connections they held in records leave;
--    a user left with none ends now unless something else holds them (an HTTP window). Plain users need nothing here: their
--    process no longer renews their score (pass 3);
-- 2. users whose end in K_UNTIL is past (a closed last connection's grace), unless a
--    connection came back;
-- 3. users whose last sign of life is older than SPAN (a killed process's, a silent one's),
--    and HTTP-only users whose last request is older than ONLINE_WINDOW;
-- 3b. the copies of scores in records that are due (K_COPIES): renewed from K_SEEN;
-- 4. a few registry buckets: fields of dead processes removed (they were inert already);
-- and the records of unlisted users past their expiry (K_REXP).
-- Returns {more, transitions}: more = 1 when a pass hit its limit.
renew_proc()  -- a call of this process: it is alive
local limit = tonumber(ARGV[A])
local more = 0
local CLEAN = 16  -- registry buckets per call

local function zrem(key, members)
  for first = 1, #members, 1000 do
    redis.call('ZREM', key, unpack(members, first, math.min(first + 999, #members)))
  end
end

-- Offline: removed from their index, last seen kept in K_LAST (one call each per pass), their
-- record (if any) loses its connections and gets the metadata expiry. A plain user's registry
-- field stays: it is inert (it counts only with a later sign of life than K_LAST's), and goes
-- with the connection's disconnect (its process retries one Redis did not take) or with its
-- process (pass 4). Removing it here cost a sweep of 10,000 ~1.7x its time.
-- (gone: by key; an HTTP-only user, WEB, leaves K_SEEN; `seen`: their score, a positive one)
local gone = {[K_SEEN] = {}, [K_HIDDEN] = {}}
local last = {}
local function offline(uid, u, idx, seen, has_record)
  local list = gone[key_of(idx)]
  list[#list + 1] = uid
  last[#last + 1] = seen; last[#last + 1] = uid
  if has_record then
    if idx == K_SEEN then
      for _, room in ipairs(rooms_in(conns_of(u))) do
        if room_remove(uid, room) then emit('leave', uid, room, 'offline', NOW, u) end
      end
    end
    for _, e in pairs(conns_of(u)) do
      if string.sub(e[1], 1, 1) ~= '~' then redis.call('SREM', pkey(e[1]), uid) end
    end
    u._c = {}; u.idle = nil; u.w = nil
    save_user(uid, u, false)
  end
  if idx ~= K_HIDDEN then emit('offline', uid, nil, 'offline', seen, u, NONE) end
end
local function flush_gone()
  local all = {}
  for idx, uids in pairs(gone) do
    zrem(idx, uids)
    for _, uid in ipairs(uids) do all[#all + 1] = uid end
    gone[idx] = {}
  end
  zrem(K_UNTIL, all)
  zrem(K_GRACES, all)
  for first = 1, #last, 1000 do
    redis.call('ZADD', K_LAST, unpack(last, first, math.min(first + 999, #last)))
  end
  last = {}
  forget_cached()  -- (K_LAST written)
end

-- Pass 1. Dead processes: the users whose record holds one of their connections.
local dead = redis.call('ZRANGEBYSCORE', K_PROCS, '-inf', '(' .. sc(NOW), 'LIMIT', 0, limit)
for _, proc in ipairs(dead) do
  local users = redis.call('SPOP', pkey(proc), limit)
  for _, uid in ipairs(users) do
    local raw = record(uid)
    if raw then
      local u = decode(raw)
      local idx, score = listed_in(index_of(u.st), uid)  -- (WEB: an HTTP-only user's)
      local listed = score ~= nil
      idx = idx or index_of(u.st)
      local before = conns_of(u)
      local conns = {}
      for c, e in pairs(before) do if e[1] ~= proc then conns[c] = e end end
      u._c = conns
      local left = live_conns(uid, u, listed)
      u._c = before
      -- no connection left and nothing else holds them (an HTTP window in K_UNTIL, a sign of
      -- life within the span): offline, their rooms go with them
      local ends = listed and (num(redis.call('ZSCORE', K_UNTIL, uid)) or score + span_of(idx))
      if listed and next(left) == nil and ends < NOW then
        offline(uid, u, idx, sc(score), true)
      else
        if listed and idx == K_SEEN then
          for _, room in ipairs(rooms_left(before, left)) do
            if room_remove(uid, room) then emit('leave', uid, room, public_state(u), NOW, u) end
          end
        end
        keep_conns(uid, u, left, u.la, listed, idx == K_SEEN and score)
        schedule_graces(uid, left)
      end
    end
  end
  if redis.call('EXISTS', pkey(proc)) == 1 then more = 1
  else redis.call('ZREM', K_PROCS, proc) end  -- absent is dead: its registry fields stay inert
end
flush_gone()

-- Pass 2. Graces that ended.
local ended = redis.call('ZRANGEBYSCORE', K_UNTIL, '-inf', '(' .. sc(NOW), 'LIMIT', 0, limit)
if #ended >= limit then more = 1 end
for _, uid in ipairs(ended) do
  local raw = record(uid)
  local u = decode(raw)
  local idx, seen = listed_in(index_of(u.st), uid)  -- (WEB: never in K_UNTIL; a guard)
  if not seen then
    redis.call('ZREM', K_UNTIL, uid)
  elseif next(live_conns(uid, u, true)) ~= nil then
    redis.call('ZREM', K_UNTIL, uid)  -- a connection came back
  else
    offline(uid, u, idx, sc(seen), raw ~= false)
  end
end
flush_gone()

-- Pass 2b. Closed connections' graces that ended while their user stays: their rooms are left.
local graced = redis.call('ZRANGEBYSCORE', K_GRACES, '-inf', '(' .. sc(NOW), 'LIMIT', 0, limit)
if #graced >= limit then more = 1 end
for _, uid in ipairs(graced) do
  local u = decode(record(uid))
  local idx, score = listed_in(index_of(u.st), uid)
  local listed = score ~= nil
  local left = live_conns(uid, u, listed)
  if not listed then
    redis.call('ZREM', K_GRACES, uid)
  else  -- (with no connection left they may still be present: an HTTP window)
    if idx == K_SEEN then
      for _, room in ipairs(rooms_left(conns_of(u), left)) do
        if room_remove(uid, room) then emit('leave', uid, room, public_state(u), NOW, u) end
      end
    end
    keep_conns(uid, u, left, u.la, true, idx == K_SEEN and score)
    schedule_graces(uid, left)
  end
end

-- Pass 3. Listings older than their span: no process renews them, no request came. Records
-- read in one HMGET. With ONLINE_WINDOW > LEASE_TTL a later end in K_UNTIL holds a connected
-- user past the span (pass 2 ends them): those are passed over, page by page.
-- One index (head.lua): the connected users' stale scores are K_SEEN's from past 0 (never an
-- HTTP-only user's negative one), the HTTP-only users' those from -(NOW - WINDOW) up to 0, whose
-- rows go on with their web scores (positive).
local function stale(idx)
  if idx == WEB then
    local rows = {}
    if NOW - WINDOW > 0 then
      rows = redis.call('ZRANGEBYSCORE', K_SEEN, '(' .. sc(WINDOW - NOW), '(0', 'WITHSCORES', 'LIMIT', 0, limit)
    end
    for i = 2, #rows, 2 do rows[i] = sc(-num(rows[i])) end
    return rows
  end
  local floor = '(' .. sc(NOW - span_of(idx))
  local low = idx == K_SEEN and '(0' or '-inf'
  if NOW - span_of(idx) <= 0 then return {} end
  if REACH == SPAN or redis.call('EXISTS', K_UNTIL) == 0 then
    return redis.call('ZRANGEBYSCORE', idx, low, floor, 'WITHSCORES', 'LIMIT', 0, limit)
  end
  local out, offset = {}, 0
  while #out < 2 * limit do
    local page = redis.call('ZRANGEBYSCORE', idx, low, floor, 'WITHSCORES', 'LIMIT', offset, limit)
    if #page == 0 then break end
    local ids = {}
    for i = 1, #page, 2 do ids[#ids + 1] = page[i] end
    local ends = redis.call('ZMSCORE', K_UNTIL, unpack(ids))
    for j = 1, #ids do
      if #out < 2 * limit and not (ends[j] and num(ends[j]) >= NOW) then
        out[#out + 1] = page[2 * j - 1]; out[#out + 1] = page[2 * j]
      end
    end
    if #page < 2 * limit then break end
    offset = offset + limit
  end
  return out
end
for _, idx in ipairs({K_SEEN, K_HIDDEN, WEB}) do
  local rows = stale(idx)
  if #rows >= 2 * limit then more = 1 end
  if #rows > 0 then
    local ids = {}
    for i = 1, #rows, 2 do ids[#ids + 1] = rows[i] end
    local raws = redis.call('HMGET', K_RECS, unpack(ids))
    for i = 1, #rows, 2 do
      local raw = raws[(i + 1) / 2]
      offline(rows[i], decode(raw or nil), idx, rows[i + 1], raw ~= false)
    end
  end
end
flush_gone()
redis.call('ZREMRANGEBYSCORE', K_LAST, '-inf', '(' .. sc(NOW - tonumber(META_TTL)))
forget_cached()
-- Records of unlisted users past their expiry (METADATA_TTL after their last save).
local expired = redis.call('ZRANGEBYSCORE', K_REXP, '-inf', '(' .. sc(NOW), 'LIMIT', 0, limit)
if #expired >= limit then more = 1 end
if #expired > 0 then
  redis.call('HDEL', K_RECS, unpack(expired))
  zrem(K_REXP, expired)
end

-- Pass 3b (after the evictions): the copies due (K_COPIES, head.lua), renewed
-- from K_SEEN in one ZMSCORE, one HMGET, one HSET and one ZADD a round: the heartbeat writes
-- only K_SEEN, and a record holder's copy is kept within half a lease of their score here. A
-- holder no longer in K_SEEN (every script that takes them out saves their record without a
-- copy: this is a guard) loses the copy.
local due = redis.call('ZRANGEBYSCORE', K_COPIES, '-inf', sc(NOW), 'LIMIT', 0, limit)
if #due >= limit then more = 1 end
if #due > 0 then
  redis.setresp(3)
  local scores = redis.call('ZMSCORE', K_SEEN, unpack(due))
  redis.setresp(2)
  local raws = redis.call('HMGET', K_RECS, unpack(due))
  local recs, dues, drop = {}, {}, {}
  for i = 1, #due do
    local uid, s, r = due[i], scores[i], raws[i]
    if r then
      local body = r  -- the record without its copy
      if copy_in(r) then body = string.sub(r, 1, -COPY_WIDTH - 1)
      elseif string.byte(r, -1) ~= 31 then body = r .. SEP end  -- a record written before cp
      if s and s.double > 0 then  -- (a negative score: HTTP only, no copy; a guard)
        recs[#recs + 1] = uid; recs[#recs + 1] = body .. copy_of(s.double)
        dues[#dues + 1] = sc(copy_due(s.double)); dues[#dues + 1] = uid
      else
        recs[#recs + 1] = uid; recs[#recs + 1] = body
        drop[#drop + 1] = uid
      end
    else
      drop[#drop + 1] = uid
    end
  end
  for first = 1, #recs, 1000 do
    redis.call('HSET', K_RECS, unpack(recs, first, math.min(first + 999, #recs)))
  end
  for first = 1, #dues, 1000 do
    redis.call('ZADD', K_COPIES, unpack(dues, first, math.min(first + 999, #dues)))
  end
  zrem(K_COPIES, drop)
end

-- Pass 4. The registry's cleaner: CLEAN buckets a call, round robin.
local cursor = tonumber(redis.call('GET', TAG .. ':clean') or '0') or 0
for b = cursor, math.min(cursor + CLEAN, BUCKETS) - 1 do
  local key = TAG .. ':c:' .. b
  local fields = redis.call('HGETALL', key)
  local drop = {}
  for i = 1, #fields, 2 do
    local p = string.match(fields[i + 1], '^([^\31]*)')
    if not proc_alive(p) then drop[#drop + 1] = fields[i] end
  end
  if #drop > 0 then redis.call('HDEL', key, unpack(drop)); forget_cached() end
end
cursor = cursor + CLEAN
if cursor >= BUCKETS then cursor = 0 end
redis.call('SET', TAG .. ':clean', cursor)
return {more, transitions()}
