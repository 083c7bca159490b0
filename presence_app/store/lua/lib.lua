-- The shared library (after head.lua): records, processes, rooms, transitions.
local function esc(s)
  if not string.find(s, '[^%w%-%._~]') then return s end
  return (string.gsub(s, '[^%w%-%._~]', function(c) return string.format('%%%02X', string.byte(c)) end))
end
local function pkey(proc) return TAG .. ':p:' .. proc end
-- The registry bucket of a user: keys.registry_bucket in Python (exact in doubles: < 2^37).
local function bkey(uid)
  local h = 0
  for i = 1, #uid do h = (h * 31 + string.byte(uid, i)) % 2147483647 end
  return TAG .. ':c:' .. (h % BUCKETS)
end
local num = tonumber
local function fmt(x) if x == nil then return '' end return string.format('%.6f', x) end
local function split_member(m) return string.match(m, '^(.*)|([^|]*)$') end

-- A user's record: these fields, joined by \31; conns is {conn: [process, room, ...]}; cp is
-- the copy of a visible connected user's K_SEEN score (records first: see save_user), always
-- the last field and COPY_WIDTH characters wide, so that a read finds it at the record's end.
-- (Python reads the first twelve and passes over cp: types.RECORD_FIELDS.)
local FIELDS = {'st', 'la', 'ls', 'lv', 'msg', 'emoji', 'dev', 'mx', 'meta', 'w', 'idle', 'conns',
                'cp'}
local SEP = '\31'
-- (a record written before cp, twelve fields, reads as one with no copy)
local RECORD = '^' .. string.rep('([^\31]*)\31', #FIELDS - 2) .. '([^\31]*)\31?(.*)$'
local function decode(raw)
  if not raw then return {_new = true} end  -- (no record: none to drop, none in K_REXP)
  local st, la, ls, lv, msg, emoji, dev, mx, meta, w, idle, conns, cp = string.match(raw, RECORD)
  local E = ''
  return {st = st ~= E and st or nil, la = la ~= E and la or nil, ls = ls ~= E and ls or nil,
          lv = lv ~= E and lv or nil, msg = msg ~= E and msg or nil,
          emoji = emoji ~= E and emoji or nil, dev = dev ~= E and dev or nil,
          mx = mx ~= E and mx or nil, meta = meta ~= E and meta or nil, w = w ~= E and w or nil,
          idle = idle ~= E and idle or nil, conns = conns ~= E and conns or nil, _cp = cp,
          _raw = raw}
end
local function conns_of(u)
  if u._c == nil then
    if u.conns then u._c = cjson.decode(u.conns) else u._c = {} end
  end
  return u._c
end
local function encode(u)
  if u._c then
    if next(u._c) == nil then u.conns = nil else u.conns = cjson.encode(u._c) end
  end
  if not (u.st or u.la or u.ls or u.lv or u.msg or u.emoji or u.dev or u.mx or u.meta or u.w
          or u.idle or u.conns) then
    return nil
  end
  return (u.st or '') .. SEP .. (u.la or '') .. SEP .. (u.ls or '') .. SEP .. (u.lv or '') .. SEP
    .. (u.msg or '') .. SEP .. (u.emoji or '') .. SEP .. (u.dev or '') .. SEP .. (u.mx or '')
    .. SEP .. (u.meta or '') .. SEP .. (u.w or '') .. SEP .. (u.idle or '') .. SEP .. (u.conns or '')
    .. SEP  -- then cp (save_user)
end
-- Whether the record holds nothing but connections and the last activity: such a user with one
-- connection is plain, and keeps it in the registry instead.
local function plain(u)
  return not (u.st or u.ls or u.lv or u.msg or u.emoji or u.dev or u.mx or u.meta or u.w or u.idle)
end
-- An unlisted user's record expires METADATA_TTL after it was last saved: K_REXP holds the
-- expiry, and the sweep drops what is past it (as a key's own expiry would).
local function record(uid) return redis.call('HGET', K_RECS, uid) end
local function drop_record(uid)
  if redis.call('HDEL', K_RECS, uid) == 1 then  -- (only a record holder is in either)
    redis.call('ZREM', K_REXP, uid)
    redis.call('ZREM', K_COPIES, uid)
  end
end
-- Saves a record (deletes it when empty): no expiry while the user is listed. The record of a
-- user in K_SEEN carries a copy of their score (cp; head.lua's copy_of: never later than the
-- score), and the user is in K_COPIES by when the sweep renews it (at the latest); any other
-- record carries none, and its user is not in K_COPIES. A script that takes a user out of
-- K_SEEN saves their record after (set_status) or saves it as unlisted (the sweep's evictions,
-- which leave K_SEEN after): no copy outlives the score it copies. A script that raises the
-- user's score after saving leaves an older copy (never later than the score), which the
-- sweep renews; connect and disconnect write K_SEEN first, so that a user who was not in it
-- gets a copy (a record saved with none waits for its next save). `score`: the user's K_SEEN
-- score now, when the caller knows it (a number; false: none, or an HTTP-only user's negative
-- one), else nil and it is read here; only a positive one (connected) is copied.
local function save_user(uid, u, listed, score)
  local raw = encode(u)
  if raw == nil then
    u._cp = nil
    if u._new then return end
    return drop_record(uid)
  end
  local s = nil
  if listed and u.st ~= 'invisible' then
    if score == nil then s = num(redis.call('ZSCORE', K_SEEN, uid)) else s = score or nil end
    if s and s <= 0 then s = nil end  -- HTTP only (one index): no copy
  end
  local cp = s and copy_of(s) or ''
  if cp ~= '' and (u._cp or '') ~= '' and u._raw == raw .. u._cp then
    -- the record as it stands, with a copy before and after: nothing to write (its copy, older,
    -- is never later than the score, and the sweep renews it when K_COPIES says: a script that
    -- raises a score leaves an older copy as well, above)
    return
  end
  redis.call('HSET', K_RECS, uid, raw .. cp)
  u._raw = raw .. cp
  if listed then
    -- a new record is in no K_REXP, nor one that carries a copy: only a listed save writes one
    -- (and takes the user out of K_REXP), the sweep renews only those of K_COPIES
    if not u._new and (u._cp or '') == '' then redis.call('ZREM', K_REXP, uid) end
  else redis.call('ZADD', K_REXP, sc(NOW + tonumber(META_TTL)), uid) end
  u._new = nil
  -- a holder already in K_COPIES stays at their renewal's time: no later than this copy's
  -- (copies only grow while the user stays in K_SEEN), so the sweep renews it no later than due
  if (cp == '') ~= ((u._cp or '') == '') then
    if s then redis.call('ZADD', K_COPIES, sc(copy_due(s)), uid)
    else redis.call('ZREM', K_COPIES, uid) end
  end
  u._cp = cp
end


-- Erased users (forget.lua): the user -> when their erasure's hold ends. Until then no write lists
-- them or keeps anything of them again: a touch, a connection or a status of theirs still on its
-- way (a request that deleted its own user, a batch of another process, a socket not closed yet)
-- is dropped, so a late write cannot undo the erasure. The hold outlasts what can be on its way:
-- a window or a lease, and a grace. Members are the ids' SHA-1: no id is kept in clear.
local K_GONE = TAG .. ':gone'
local HOLD = REACH + GRACE
local any_gone = nil
local function erased(uid)
  if any_gone == nil then any_gone = redis.call('EXISTS', K_GONE) == 1 end
  return any_gone and (num(redis.call('ZSCORE', K_GONE, redis.sha1hex(uid))) or -1) > NOW
end

local function index_of(st) if st == 'invisible' then return K_HIDDEN end return K_SEEN end
local function span_of(idx) if idx == WEB then return WINDOW end return SPAN end
-- The key an index lives in: WEB is K_SEEN's negative part (head.lua).
local function key_of(idx) if idx == WEB then return K_SEEN end return idx end
-- The user's listing in their index (index_of): (the index, their score, a positive number),
-- WEB for an HTTP-only user's negative K_SEEN score; nil when listed nowhere.
local function listed_in(idx, uid)
  local s = num(redis.call('ZSCORE', idx, uid))
  if idx ~= K_SEEN then
    if s == nil then return nil, nil end
    return idx, s
  end
  return listing_of(s)
end
-- A connected user's score in their index (index_of): nil when absent or HTTP only.
local function conn_score(idx, uid)
  local s = num(redis.call('ZSCORE', idx, uid))
  if s and s > 0 then return s end
  return nil
end

-- Processes: a lease each, renewed by the scripts that call renew_proc (heartbeat, connect,
-- disconnect, sweep: those that write the calling process into a connection, and the
-- heartbeats' batches, which the process's coalescer sends at least every LEASE_TTL / 3 while
-- it holds a connection, empty if no beat is due: realtime/coalescer.py). A process's other
-- writes (join, leave, set_status, touch, activity, idle, forget) do not renew it: their
-- connections' lease is the keepalive's, and a caller that holds none (a management command,
-- a web worker without sockets) needs no lease. A script takes its own process as alive: it
-- is calling. A closed connection in its grace is held by a pseudo-process "~<end of the grace>".
local alive_cache = {}
local function proc_alive(p)
  if p == PROC then return true end
  local known = alive_cache[p]
  if known == nil then
    if string.sub(p, 1, 1) == '~' then known = (num(string.sub(p, 2)) or -1) >= NOW
    else known = (num(redis.call('ZSCORE', K_PROCS, p)) or -1) >= NOW end
    alive_cache[p] = known
  end
  return known
end
local function renew_proc()
  redis.call('ZADD', K_PROCS, 'GT', sc(NOW + LEASE_TTL), PROC)
end

-- The user's registry field: (process, conn, last activity, window end) or nil. The window end
-- (the user's last request + ONLINE_WINDOW) is there only while it is to come: a connected
-- user's HTTP window, which outlives their connection's close (disconnect.lua).
-- A script asks about its user's field several times (their live connections, their window
-- end, their last activity): the field is read once a script and user (reg_cache), and every
-- write of it here (registry_set, registry_del) keeps the cache; the sweep's cleaner, which
-- deletes fields of dead processes in bulk, empties it (forget_cached).
local reg_cache = {}
local function registry_of(uid)
  local v = reg_cache[uid]
  if v == nil then
    v = redis.call('HGET', bkey(uid), uid)
    reg_cache[uid] = v
  end
  if not v then return nil end
  local p, c, rest = string.match(v, '^([^\31]*)\31([^\31]*)\31(.*)$')
  local la, w = string.match(rest, '^([^\31]*)\31(.*)$')
  if la then return p, c, la, w end
  return p, c, rest, nil
end
local function registry_set(uid, p, c, la, w)
  local v = p .. SEP .. c .. SEP .. (la or '')
  if w then v = v .. SEP .. w end
  redis.call('HSET', bkey(uid), uid, v)
  reg_cache[uid] = v
end
local function registry_del(uid)
  if reg_cache[uid] == false then return end  -- known absent: read or deleted by this script
  redis.call('HDEL', bkey(uid), uid)
  reg_cache[uid] = false
end
-- A user's connections are in one place: their registry field (a plain user's one) or their
-- record's conns, never both (keep_conns, the only code that moves them, writes one and deletes
-- the other; touch and activity rewrite a field only where one stands, the sweep's evictions
-- empty the conns and leave an inert field; tests/store/test_store_model.py checks it after
-- every step). So a record that holds connections tells that its user has no field: the writes
-- load a user with load_user, which then does not read the field (nor K_LAST for it), and
-- keep_conns deletes none. user_of: the user of a record already read (raw: false for none).
local function user_of(uid, raw)
  local u = decode(raw)
  if u.conns and reg_cache[uid] == nil then reg_cache[uid] = false end
  return u
end
local function load_user(uid) return user_of(uid, record(uid)) end
-- A sign of life of a user an open connection holds outlasts a later end (ONLINE_WINDOW >
-- LEASE_TTL) that ends within its span: the connection carries them from here (K_UNTIL holds
-- the later of the two while it is there).
local function outlast_until(uid)
  local e = num(redis.call('ZSCORE', K_UNTIL, uid))
  if e and e <= NOW + SPAN then redis.call('ZREM', K_UNTIL, uid) end
end
-- The later of two window ends (strings or nil), nil once past.
local function window_end(a, b)
  local e = math.max(num(a) or -1, num(b) or -1)
  if e < NOW then return nil end
  return sc(e)
end

-- A connection is an entry {process, room, room, ...}. The user's live connections (conn ->
-- entry): the registry's or the record's, those whose process's lease (or grace) runs.
-- `listed`: whether the user is in an index (an unlisted user has none).
-- Whether a registry field still stands for a connection: its process lives, and the user was
-- not evicted since (the sweep leaves a field behind and records the user's last seen in
-- K_LAST: a field whose last activity is not later belongs to the ended listing).
-- (K_LAST's entry is read once a script and user too: last_cache; a script that writes K_LAST
-- empties it, forget_cached)
local last_cache = {}
local function registry_live(uid, p, la)
  if not (p and proc_alive(p)) then return false end
  local ended = last_cache[uid]
  if ended == nil then
    ended = num(redis.call('ZSCORE', K_LAST, uid)) or false
    last_cache[uid] = ended
  end
  return not ended or (num(la) or 0) > ended
end
local function forget_cached()
  reg_cache, last_cache = {}, {}
end

local function live_conns(uid, u, listed)
  local out = {}
  if not listed then return out end
  local p, c, la = registry_of(uid)
  if registry_live(uid, p, la) then out[c] = {p} end
  for cid, e in pairs(conns_of(u)) do
    if proc_alive(e[1]) then out[cid] = e end
  end
  return out
end

-- Rooms: a member set per room and shard, K_ROOMS counts them.
local K_ROOMS = TAG .. ':rooms'
local function rkey(room) return TAG .. ':r:' .. esc(room) end
local function room_add(uid, room)
  if redis.call('ZADD', rkey(room), 'NX', sc(NOW), uid) == 1 then
    redis.call('ZINCRBY', K_ROOMS, 1, room)
    return true
  end
  return false
end
local function room_remove(uid, room)
  if redis.call('ZREM', rkey(room), uid) == 1 then
    if tonumber(redis.call('ZINCRBY', K_ROOMS, -1, room)) <= 0 then redis.call('ZREM', K_ROOMS, room) end
    return true
  end
  return false
end
-- The rooms of a set of connections, sorted.
local function rooms_in(conns)
  local set, rooms = {}, {}
  for _, e in pairs(conns) do
    for i = 2, #e do
      if not set[e[i]] then set[e[i]] = true; rooms[#rooms + 1] = e[i] end
    end
  end
  table.sort(rooms)
  return rooms
end
-- The rooms that `before` held and `after` does not.
local function rooms_left(before, after)
  local still, out = {}, {}
  for _, r in ipairs(rooms_in(after)) do still[r] = true end
  for _, r in ipairs(rooms_in(before)) do if not still[r] then out[#out + 1] = r end end
  return out
end

-- Keeps the user's connections `conns`: a plain user's one room-less connection in the registry,
-- else in the record (and the user in each process's set). Saves the record.
local on_dropped_room = nil  -- set below, once transitions can be emitted
local function keep_conns(uid, u, conns, la, listed, score)
  -- rooms held only by connections dropped here (a dead process's, a grace's end) are left
  if on_dropped_room then
    for _, room in ipairs(rooms_left(conns_of(u), conns)) do on_dropped_room(uid, u, room) end
  end
  local n, only_c, only_e = 0, nil, nil
  for c, e in pairs(conns) do n = n + 1; only_c, only_e = c, e end
  -- a connected user's HTTP window goes with their connections (nothing is kept without one:
  -- a user whose last connection closed is held by K_UNTIL)
  local _, _, _, rw = registry_of(uid)
  local w = n > 0 and window_end(rw, u.w) or nil
  u.w = nil
  local single = n == 1 and #only_e == 1 and string.sub(only_e[1], 1, 1) ~= '~' and plain(u)
  local kept, named = {}, {}
  if not single then for _, e in pairs(conns) do kept[e[1]] = true end end
  for _, e in pairs(conns_of(u)) do  -- processes the record named and will not any more
    named[e[1]] = true
    if not kept[e[1]] and string.sub(e[1], 1, 1) ~= '~' then redis.call('SREM', pkey(e[1]), uid) end
  end
  if single then
    registry_set(uid, only_e[1], only_c, la, w)
    u._c = {}; u.la = nil
  else
    registry_del(uid)
    u._c = conns
    u.w = w
    if n > 0 then u.la = la or u.la end
    -- (a process the record named has the user in its set already: every save of a record
    -- naming a process adds them, here or in the heartbeat's return from a grace)
    for p, _ in pairs(kept) do
      if string.sub(p, 1, 1) ~= '~' and not named[p] then redis.call('SADD', pkey(p), uid) end
    end
  end
  save_user(uid, u, listed, score)
end

-- Transitions (emit).
local OUT = {}
local function transitions() return table.concat(OUT, '\30') end
local function live_message(u, key)
  local mx = num(u.mx)
  if mx and mx < NOW then return nil end
  return u[key]
end
local function emit(kind, uid, room, state, t, u, rooms)
  local msg, emoji = live_message(u, 'msg'), live_message(u, 'emoji')
  local extra
  if msg == nil and emoji == nil and rooms == nil then
    extra = '{}'
  elseif msg == nil and emoji == nil and next(rooms) == nil then
    extra = '{"rooms":{}}'
  else
    extra = {message = msg, emoji = emoji}
    if rooms then extra.rooms = rooms end
    extra = cjson.encode(extra)
  end
  if type(t) ~= 'string' then t = fmt(t or NOW) end
  OUT[#OUT + 1] = kind .. '\31' .. uid .. '\31' .. (room or '') .. '\31' .. state .. '\31' .. t .. '\31' .. extra
end
local NONE = {}

-- Closed connections in their grace that hold rooms: the user -> the earliest grace end, so that
-- the sweep leaves those rooms then (a user with no connection left ends by K_UNTIL instead).
local K_GRACES = TAG .. ':graces'
-- The earliest grace end of those connections that hold rooms, nil when none.
local function grace_end(conns)
  local first = nil
  for _, e in pairs(conns) do
    if #e > 1 and string.sub(e[1], 1, 1) == '~' then
      local t = num(string.sub(e[1], 2))
      if first == nil or t < first then first = t end
    end
  end
  return first
end
local function schedule_graces(uid, conns)
  local first = grace_end(conns)
  if first then redis.call('ZADD', K_GRACES, sc(first), uid) else redis.call('ZREM', K_GRACES, uid) end
end

local function public_state(u)
  if u.st == 'invisible' then return 'offline' end
  if u.st == 'dnd' then return 'dnd' end
  if u.idle == '1' then return 'idle' end
  return 'online'
end
on_dropped_room = function(uid, u, room)
  if room_remove(uid, room) then emit('leave', uid, room, public_state(u), NOW, u) end
end

-- a < b as Redis orders members (bytes; Lua's < follows the server's locale)
local function below(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- HTTP-only users (WEB: K_SEEN's negative scores) whose web score is at least `floor`, most
-- recent first as every listing (web score, then id, both descending), flat (id, web score), at
-- most `count` (-1: all); with a position (`after`, `after_id`: a listed entry's web score and
-- id) those after it. Their scores are negated, so the most recent are the lowest: read in
-- ascending order (ZRANGEBYSCORE), where equal scores come with their ids ascending, each run
-- of equal scores is given in reverse (a run cut by a page's end is read whole from its end,
-- ZREVRANGEBYSCORE of that one score), so that the order is the other indexes' own.
local function web_list(floor, count, after, after_id)
  local out = {}
  local top = neg_top(floor)
  local function need() if count < 0 then return -1 end return count - #out / 2 end
  local function put(uid, v) out[#out + 1] = uid; out[#out + 1] = sc(-num(v)) end
  local function run(v, n)  -- the run of score v, ids descending, at most n (-1: all)
    local rows
    if n < 0 then rows = redis.call('ZREVRANGEBYSCORE', K_SEEN, v, v, 'WITHSCORES')
    else rows = redis.call('ZREVRANGEBYSCORE', K_SEEN, v, v, 'WITHSCORES', 'LIMIT', 0, n) end
    for i = 1, #rows, 2 do put(rows[i], rows[i + 1]) end
  end
  local low = '-inf'
  if after then
    if after < floor then return out end
    local v = sc(-after)
    -- the position's run: its ids below after_id (ranks first..k-1, ascending), descending
    local first = redis.call('ZCOUNT', K_SEEN, '-inf', '(' .. v)
    local k, hi = first, first + redis.call('ZCOUNT', K_SEEN, v, v)
    while k < hi do
      local mid = math.floor((k + hi) / 2)
      if below(redis.call('ZRANGE', K_SEEN, mid, mid)[1], after_id) then k = mid + 1 else hi = mid end
    end
    if k > first then
      local n = need()
      local from = first
      if n >= 0 and k - n > first then from = k - n end
      local rows = redis.call('ZRANGE', K_SEEN, from, k - 1, 'WITHSCORES')
      for i = #rows - 1, 1, -2 do put(rows[i], rows[i + 1]) end
    end
    low = '(' .. v
  end
  while need() ~= 0 do
    local n = need()
    local chunk = 1000
    if n >= 0 then chunk = math.min(math.max(n, 16), 1000) end
    local page = redis.call('ZRANGEBYSCORE', K_SEEN, low, top, 'WITHSCORES', 'LIMIT', 0, chunk)
    if #page == 0 then break end
    local full = #page == 2 * chunk
    local i = 1
    while i <= #page and need() ~= 0 do
      local v, j = page[i + 1], i
      while j + 2 <= #page and page[j + 3] == v do j = j + 2 end
      if full and j + 1 == #page then  -- the page's last run: perhaps cut, read it whole
        run(v, need())
      else
        for x = j, i, -2 do
          if need() == 0 then break end
          put(page[x], v)
        end
      end
      i = j + 2
    end
    if not full then break end
    low = '(' .. page[#page]
  end
  return out
end

-- Users of the index present now, most recently seen first (flat: id, score), at most `count`.
-- A user of seen or hidden whose score is past SPAN is still present while a later end holds them
-- (ONLINE_WINDOW > LEASE_TTL: K_UNTIL, up to REACH after their score). WEB: the HTTP-only users
-- within their window (web_list; a web user's end is their window: never in K_UNTIL).
local function present_list(idx, count)
  if idx == WEB then return web_list(NOW - WINDOW, count) end
  local out, offset = {}, 0
  local chunk = 1000
  if count >= 0 then chunk = math.min(math.max(count, 16), 1000) end
  local span = span_of(idx)
  local floor = pos_floor(NOW - REACH)
  local any_until = redis.call('EXISTS', K_UNTIL) == 1
  while count < 0 or #out < 2 * count do
    local page = redis.call('ZREVRANGEBYSCORE', idx, '+inf', floor, 'WITHSCORES', 'LIMIT', offset, chunk)
    if #page == 0 then break end
    local ids = {}
    for i = 1, #page, 2 do ids[#ids + 1] = page[i] end
    local ends = any_until and redis.call('ZMSCORE', K_UNTIL, unpack(ids)) or {}
    for j, uid in ipairs(ids) do
      if count >= 0 and #out >= 2 * count then break end
      local e = num(ends[j])
      if (e == nil and num(page[2 * j]) + span >= NOW) or (e ~= nil and e >= NOW) then
        out[#out + 1] = uid; out[#out + 1] = page[2 * j]
      end
    end
    if #page < 2 * chunk then break end
    offset = offset + chunk
  end
  return out
end
local function present_count(idx)
  if idx == WEB then  -- a web user's end is their window: never in K_UNTIL
    return redis.call('ZCOUNT', K_SEEN, '-inf', neg_top(NOW - WINDOW))
  end
  local span = span_of(idx)
  local n = redis.call('ZCOUNT', idx, pos_floor(NOW - span), '+inf')
  local ended = redis.call('ZRANGEBYSCORE', K_UNTIL, sc(NOW - span), '(' .. sc(NOW))
  for first = 1, #ended, 1000 do
    local chunk = {}
    for i = first, math.min(first + 999, #ended) do chunk[#chunk + 1] = ended[i] end
    for _, s in ipairs(redis.call('ZMSCORE', idx, unpack(chunk))) do
      local seen = num(s)
      if seen and seen > 0 and seen >= NOW - span then n = n - 1 end
    end
  end
  if REACH > span then  -- those past the span whom a later end holds
    local held = redis.call('ZRANGEBYSCORE', K_UNTIL, sc(NOW), '+inf')
    for first = 1, #held, 1000 do
      local chunk = {}
      for i = first, math.min(first + 999, #held) do chunk[#chunk + 1] = held[i] end
      for _, s in ipairs(redis.call('ZMSCORE', idx, unpack(chunk))) do
        local seen = num(s)
        if seen and seen > 0 and seen < NOW - span then n = n + 1 end
      end
    end
  end
  return n
end
