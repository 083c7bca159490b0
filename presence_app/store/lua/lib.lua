-- Shared prelude of every presence script (prepended by scripts.py).
-- KEYS: the shard's indexes (seen, hidden, leases, active, rooms). ARGV[1]: the shard's key base
-- ('{prefix:shard}:2'); ARGV[2]: now ('' = the server clock); ARGV[3..7]: LEASE_TTL,
-- DISCONNECT_GRACE, ONLINE_WINDOW, IDLE_AFTER, METADATA_TTL; ARGV[8..]: the script's own.
--
-- Layout 2. K_SEEN scores each listed user by their last sign of life (connect, heartbeat,
-- activity, touch); invisible users sit in K_HIDDEN instead, out of every public query. A sign
-- of life keeps a user present at most SPAN = max(LEASE_TTL, ONLINE_WINDOW) after it; a user
-- whose presence ends sooner (an HTTP window, a closed connection's grace, activity after the
-- last heartbeat) has that end in K_UNTIL. So a listed user's presence runs until
-- K_UNTIL[u] or K_SEEN[u] + SPAN, never before their seen score. K_LEASES: "user|conn" -> the
-- connection's lease expiry. K_ACTIVE: user -> last activity, until announced idle.
-- A user's record is one string of fields (FIELDS, split by \31), read by get_many in one MGET.
local K_SEEN, K_HIDDEN, K_LEASES, K_ACTIVE, K_ROOMS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local TAG = ARGV[1]
local K_UNTIL = TAG .. ':until'
local NOW = tonumber(ARGV[2])
if not NOW then
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local LEASE_TTL, GRACE, WINDOW = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local IDLE_AFTER, META_TTL = tonumber(ARGV[6]), ARGV[7]  -- the TTL as Redis takes it
local SPAN = math.max(LEASE_TTL, WINDOW)
local A = 8  -- index of the first script argument

-- The same percent-encoding as keys.esc() in Python: user text never shapes a key.
local function esc(s)
  if not string.find(s, '[^%w%-%._~]') then return s end  -- plain ids: nothing to encode
  return (string.gsub(s, '[^%w%-%._~]', function(c) return string.format('%%%02X', string.byte(c)) end))
end
local function ukey(uid) return TAG .. ':u:' .. esc(uid) end
local function rkey(room) return TAG .. ':r:' .. esc(room) end
local num = tonumber
local function fmt(x) if x == nil then return '' end return string.format('%.6f', x) end
-- A time as Redis gets it: exact (Lua's own conversion keeps 14 digits, 0.1 ms at today's epoch).
local function sc(x) return string.format('%.17g', x) end
local function split_member(m) return string.match(m, '^(.*)|([^|]*)$') end

-- The user record: override (st), last activity (la), last seen (ls), frozen public last seen
-- of an invisible user (lv), status text (msg, emoji, its expiry mx), device (dev), free
-- metadata (meta, JSON), HTTP window end (w), idle announced (idle), and the connections with
-- the rooms each joined (conns, JSON: {conn: [room, ...]}). plans.py reads the first nine.
local FIELDS = {'st', 'la', 'ls', 'lv', 'msg', 'emoji', 'dev', 'mx', 'meta', 'w', 'idle', 'conns'}
local SEP = '\31'  -- refused in status text and device; escaped by JSON

-- One pattern match per record (a capture per field), not a search per field: the sweep and
-- every write decode one.
local RECORD = '^' .. string.rep('([^\31]*)\31', #FIELDS - 1) .. '(.*)$'
local function decode(raw)
  if not raw then return {} end
  local st, la, ls, lv, msg, emoji, dev, mx, meta, w, idle, conns = string.match(raw, RECORD)
  local E = ''  -- an empty field is an unset one
  return {st = st ~= E and st or nil, la = la ~= E and la or nil, ls = ls ~= E and ls or nil,
          lv = lv ~= E and lv or nil, msg = msg ~= E and msg or nil,
          emoji = emoji ~= E and emoji or nil, dev = dev ~= E and dev or nil,
          mx = mx ~= E and mx or nil, meta = meta ~= E and meta or nil, w = w ~= E and w or nil,
          idle = idle ~= E and idle or nil, conns = conns ~= E and conns or nil}
end

-- The user's connections as a table, decoded once per script.
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
  -- one concatenation (FIELDS' order), not a table of parts
  return (u.st or '') .. SEP .. (u.la or '') .. SEP .. (u.ls or '') .. SEP .. (u.lv or '') .. SEP
    .. (u.msg or '') .. SEP .. (u.emoji or '') .. SEP .. (u.dev or '') .. SEP .. (u.mx or '')
    .. SEP .. (u.meta or '') .. SEP .. (u.w or '') .. SEP .. (u.idle or '') .. SEP .. (u.conns or '')
end

-- Layout 1 -> 2 (a rolling deploy): a user's first write in layout 2 adopts the profile their
-- layout-1 hash kept (override, status text, device, last seen), so that an invisible user stays
-- invisible and nothing the user set is lost. upgrade.upgrade_from_v1 moves the rest and drops
-- layout 1 once no old process is left; this lookup then finds nothing.
local V1_USER = string.match(TAG, '^(.*):2$') .. ':u:'
local V1_FIELDS = {'st', 'la', 'ls', 'lv', 'msg', 'emoji', 'dev', 'mx', 'meta'}

-- The record of a user about to change (nil fields when there is none); and its key.
local function load_user(uid)
  local uk = ukey(uid)
  local raw = redis.call('GET', uk)
  if raw then return decode(raw), uk end
  local u, old = {}, redis.call('HMGET', V1_USER .. esc(uid), unpack(V1_FIELDS))
  for i, name in ipairs(V1_FIELDS) do if old[i] then u[name] = old[i] end end
  return u, uk
end
local function read_user(uid) return decode(redis.call('GET', ukey(uid))) end

-- load_user for many users (a sweep's batch): one MGET per 1,000 instead of a GET each.
-- Returns their records and keys, in the order of `uids`.
local function load_users(uids)
  local us, uks = {}, {}
  for first = 1, #uids, 1000 do
    local keys = {}
    for i = first, math.min(first + 999, #uids) do keys[#keys + 1] = ukey(uids[i]) end
    local raws = redis.call('MGET', unpack(keys))
    for j = 1, #keys do
      local i = first + j - 1
      if raws[j] then us[i], uks[i] = decode(raws[j]), keys[j]
      else us[i], uks[i] = load_user(uids[i]) end
    end
  end
  return us, uks
end

-- A record lives as long as its user is listed, then METADATA_TTL after the last change: no
-- expiry is kept (and paid for) while they are online.
local function save_user(uk, u, listed)
  local raw = encode(u)
  if raw == nil then redis.call('DEL', uk)
  elseif listed then redis.call('SET', uk, raw)
  else redis.call('SET', uk, raw, 'EX', META_TTL) end
end

-- The index a user is listed in: invisible users sit in K_HIDDEN, out of every public query.
local function index_of(st) if st == 'invisible' then return K_HIDDEN end return K_SEEN end

-- When a listed user's presence ends, given their score in their index (nil: not listed).
local function until_of(uid, seen)
  if seen == nil then return nil end
  local x = redis.call('ZSCORE', K_UNTIL, uid)
  if x then return tonumber(x) end
  return seen + SPAN
end

-- Records when a user's presence ends: implied by their seen score when it is SPAN after it.
local function set_until(uid, seen, until_)
  if until_ >= seen + SPAN then redis.call('ZREM', K_UNTIL, uid)
  else redis.call('ZADD', K_UNTIL, sc(until_), uid) end
end

-- Whether a listed user is present now, from their seen score and K_UNTIL entry (false: none).
local function alive(seen, ends)
  if seen == nil then return false end
  if ends then return ends >= NOW end
  return seen + SPAN >= NOW
end

-- State as the public sees it, given the user's fields and their 'until' (nil: not listed).
local function public_state(u, until_)
  if until_ == nil or until_ < NOW or u.st == 'invisible' then return 'offline' end
  if u.st == 'dnd' then return 'dnd' end
  local la = num(u.la)
  if la and NOW - la >= IDLE_AFTER then return 'idle' end
  return 'online'
end

-- Transitions are 6 fields split by \31: kind, user, room, state, time, extra (JSON: the user's
-- rooms on user-level transitions, their message and emoji); a script returns them as one string,
-- split by \30 (transitions()): one reply to parse, not six per transition (a sweep's thousands).
-- No field can hold either separator: ids and rooms refuse control characters, JSON escapes them.
-- Every event mirrors a change of index membership (online/offline: K_SEEN; join/leave: a room
-- set), so the stream cannot repeat.
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
  if msg == nil and emoji == nil and rooms ~= nil and next(rooms) == nil then
    extra = '{"rooms":{}}'  -- an offline without status text: most of a sweep's output
  else
    extra = {message = msg, emoji = emoji}
    if rooms then extra.rooms = rooms end
    extra = cjson.encode(extra)
  end
  if type(t) ~= 'string' then t = fmt(t or NOW) end  -- a time already formatted is kept
  OUT[#OUT + 1] = kind .. '\31' .. uid .. '\31' .. (room or '') .. '\31' .. state .. '\31' .. t .. '\31' .. extra
end

-- Rooms: a room set per shard holds its visible members (score: when they came); K_ROOMS counts
-- each room's visible members in this shard, for occupancy listings. Both return true on change.
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

-- Whether any of the user's connections is in the room.
local function in_room(u, room)
  for _, rooms in pairs(conns_of(u)) do
    for _, r in ipairs(rooms) do if r == room then return true end end
  end
  return false
end

-- The user's rooms (those any of their connections joined), sorted.
local function rooms_of(u)
  local set, rooms = {}, {}
  for _, list in pairs(conns_of(u)) do
    for _, r in ipairs(list) do
      if not set[r] then set[r] = true; rooms[#rooms + 1] = r end
    end
  end
  table.sort(rooms)
  return rooms
end

-- Forgets one connection (its lease must be removed by the caller); returns the rooms the user
-- leaves with it (those no other connection of theirs is in).
local NONE = {}  -- an empty list, never written to: no table per user where nothing is left
local function forget_connection(u, cid)
  local conns = conns_of(u)
  local rooms = conns[cid]
  conns[cid] = nil
  if rooms == nil or rooms[1] == nil then return NONE end
  local left = {}
  for _, room in ipairs(rooms) do
    if not in_room(u, room) then left[#left + 1] = room end
  end
  return left
end
local function leave_rooms(uid, rooms, state, u)
  for _, room in ipairs(rooms) do
    if room_remove(uid, room) then emit('leave', uid, room, state, NOW, u) end
  end
end

-- The latest time the user counts as online: their live leases and their HTTP window.
local function recompute_until(uid, u)
  local best = num(u.w) or 0
  local conns = conns_of(u)
  if next(conns) ~= nil then
    local members = {}
    for cid, _ in pairs(conns) do members[#members + 1] = uid .. '|' .. cid end
    for _, e in ipairs(redis.call('ZMSCORE', K_LEASES, unpack(members))) do
      local exp = num(e)
      if exp and exp > best then best = exp end
    end
  end
  return best
end

-- Ends a user's presence: their remaining connections and rooms, their listing and timers; their
-- last seen is their last sign of life. Removes them from `idx` unless `keep_index` (the caller
-- removes a batch at once). Returns that last seen.
local function evict(uid, u, uk, idx, seen, keep_index)
  local conns = conns_of(u)
  if next(conns) ~= nil then
    local left, members = {}, {}
    for cid, _ in pairs(conns) do
      members[#members + 1] = uid .. '|' .. cid
      for _, room in ipairs(forget_connection(u, cid)) do left[#left + 1] = room end
    end
    redis.call('ZREM', K_LEASES, unpack(members))
    leave_rooms(uid, left, 'offline', u)
  end
  -- `seen` may come as Redis' own text of the score: kept as it is when it is the latest
  local last = num(u.ls) or 0
  if seen and num(seen) > last then
    last = num(seen)
    u.ls = type(seen) == 'string' and seen or sc(last)
  end
  u.w, u.idle = nil, nil
  if not keep_index then
    redis.call('ZREM', idx, uid)
    redis.call('ZREM', K_UNTIL, uid)
    redis.call('ZREM', K_ACTIVE, uid)
  end
  save_user(uk, u, false)
  return last
end

-- After a sign of life of a visible user: 'online' when they were not listed, 'update' when
-- they come back from idle (the others saw them yellow).
local function announce_life(uid, u, listed, was_idle, until_)
  if not listed then
    emit('online', uid, nil, public_state(u, until_), NOW, u, rooms_of(u))
  elseif was_idle then
    emit('update', uid, nil, public_state(u, until_), NOW, u, rooms_of(u))
  end
end

-- Marks a user active now; returns true when they were idle (announced or by the clock).
local function mark_active(uid, u)
  local la = num(u.la)
  local was_idle = u.idle == '1' or (la ~= nil and NOW - la >= IDLE_AFTER)
  u.la = sc(NOW); u.idle = nil
  redis.call('ZADD', K_ACTIVE, sc(NOW), uid)
  return was_idle
end

-- A sign of life of a listed or new user in `idx`: their seen score moves up to now.
local function seen_now(idx, uid, seen)
  redis.call('ZADD', idx, 'GT', sc(NOW), uid)
  return math.max(seen or NOW, NOW)
end

-- Users of the index present now, most recently seen first, with their seen scores (flat), at
-- most `count` (-1: all). O(log N + count + the users whose presence ended sooner and who have
-- not been swept yet).
local function present_list(idx, count)
  local out, offset = {}, 0
  local chunk = 1000
  if count >= 0 then chunk = math.min(math.max(count, 16), 1000) end
  local floor = sc(NOW - SPAN)
  while count < 0 or #out < 2 * count do
    local page = redis.call('ZREVRANGEBYSCORE', idx, '+inf', floor, 'WITHSCORES', 'LIMIT', offset, chunk)
    if #page == 0 then break end
    local ids = {}
    for i = 1, #page, 2 do ids[#ids + 1] = page[i] end
    local ends = redis.call('ZMSCORE', K_UNTIL, unpack(ids))
    for j, uid in ipairs(ids) do
      if count >= 0 and #out >= 2 * count then break end
      local e = num(ends[j])
      if e == nil or e >= NOW then out[#out + 1] = uid; out[#out + 1] = page[2 * j] end
    end
    if #page < 2 * chunk then break end
    offset = offset + chunk
  end
  return out
end

-- How many users of the index are present now: those seen within SPAN, minus those among them
-- whose presence ended sooner (their end is past, and not before their seen score: so within
-- [now - SPAN, now) of K_UNTIL; only users not swept yet).
local function present_count(idx)
  local n = redis.call('ZCOUNT', idx, sc(NOW - SPAN), '+inf')
  local ended = redis.call('ZRANGEBYSCORE', K_UNTIL, sc(NOW - SPAN), '(' .. sc(NOW))
  for first = 1, #ended, 1000 do
    local chunk = {}
    for i = first, math.min(first + 999, #ended) do chunk[#chunk + 1] = ended[i] end
    for _, s in ipairs(redis.call('ZMSCORE', idx, unpack(chunk))) do
      local seen = num(s)
      if seen and seen >= NOW - SPAN then n = n - 1 end
    end
  end
  return n
end
