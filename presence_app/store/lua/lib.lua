-- Shared prelude of every presence script (prepended by scripts.py).
-- KEYS: the shard's indexes. ARGV[1]: the shard's hash tag; ARGV[2]: now ('' = the server clock);
-- ARGV[3..7]: LEASE_TTL, DISCONNECT_GRACE, ONLINE_WINDOW, IDLE_AFTER, METADATA_TTL;
-- ARGV[8..]: the script's own arguments.
local K_ONLINE, K_HIDDEN, K_LEASES, K_ACTIVE, K_ROOMS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local TAG = ARGV[1]
local NOW = tonumber(ARGV[2])
if not NOW then
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local LEASE_TTL, GRACE, WINDOW = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local IDLE_AFTER, META_TTL = tonumber(ARGV[6]), tonumber(ARGV[7])
local A = 8  -- index of the first script argument

-- The same percent-encoding as keys.esc() in Python: user text never shapes a key.
local function esc(s)
  if not string.find(s, '[^%w%-%._~]') then return s end  -- plain ids: nothing to encode
  return (string.gsub(s, '[^%w%-%._~]', function(c) return string.format('%%%02X', string.byte(c)) end))
end
local function ukey(uid) return TAG .. ':u:' .. esc(uid) end
local function rkey(room) return TAG .. ':r:' .. esc(room) end
local function num(s) return tonumber(s) end
local function fmt(x) if x == nil then return '' end return string.format('%.6f', x) end
local function split_member(m) return string.match(m, '^(.*)|([^|]*)$') end

-- A user's hash as a table (small: a handful of fields plus one per connection and room).
local function hgetall(key)
  local flat, t = redis.call('HGETALL', key), {}
  for i = 1, #flat, 2 do t[flat[i]] = flat[i + 1] end
  return t
end

-- The index a user is listed in: invisible users sit in K_HIDDEN, out of every public query.
local function index_of(st) if st == 'invisible' then return K_HIDDEN end return K_ONLINE end

-- State as the public sees it, given the user's fields and their 'until' (nil: not listed).
local function public_state(u, until_)
  if until_ == nil or until_ < NOW or u.st == 'invisible' then return 'offline' end
  if u.st == 'dnd' then return 'dnd' end
  local la = num(u.la)
  if la and NOW - la >= IDLE_AFTER then return 'idle' end
  return 'online'
end

-- Transitions are flat 6-tuples: kind, user, room, state, time, extra (JSON: the user's rooms on
-- user-level transitions, their message and emoji). Every event mirrors a change of index
-- membership (online/offline: K_ONLINE; join/leave: a room set), so the stream cannot repeat.
local OUT = {}
local function live_message(u, key)
  local mx = num(u.mx)
  if mx and mx < NOW then return nil end
  return u[key]
end
local function emit(kind, uid, room, state, t, u, rooms)
  local extra = {message = live_message(u, 'msg'), emoji = live_message(u, 'emoji')}
  if rooms then extra.rooms = rooms end
  OUT[#OUT + 1] = kind; OUT[#OUT + 1] = uid; OUT[#OUT + 1] = room or ''
  OUT[#OUT + 1] = state; OUT[#OUT + 1] = fmt(t or NOW); OUT[#OUT + 1] = cjson.encode(extra)
end

-- Rooms: a room set per shard holds its visible members (score: when they came); K_ROOMS counts
-- each room's visible members in this shard, for occupancy listings. Both return true on change.
local function room_add(uid, room)
  if redis.call('ZADD', rkey(room), 'NX', NOW, uid) == 1 then
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

-- The user's rooms (those any of their connections joined), from the refcount fields 'r:<room>'.
local function rooms_of(u)
  local rooms = {}
  for f, _ in pairs(u) do
    if string.sub(f, 1, 2) == 'r:' then rooms[#rooms + 1] = string.sub(f, 3) end
  end
  table.sort(rooms)
  return rooms
end

-- Drops one connection: its lease, its rooms (a leave where it was the user's last connection
-- there) and its field. Returns the lease's expiry, or nil when the connection was unknown.
local function drop_connection(uid, cid, uk, u)
  local member = uid .. '|' .. cid
  local exp = num(redis.call('ZSCORE', K_LEASES, member))
  redis.call('ZREM', K_LEASES, member)
  local field = u['c:' .. cid]
  if field == nil then return exp end
  for _, room in ipairs(cjson.decode(field)) do
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
  redis.call('HDEL', uk, 'c:' .. cid)
  u['c:' .. cid] = nil
  return exp
end

-- The latest time the user counts as online: their live leases and their HTTP window.
local function recompute_until(uid, u)
  local best = num(u.w) or 0
  for f, _ in pairs(u) do
    if string.sub(f, 1, 2) == 'c:' then
      local exp = num(redis.call('ZSCORE', K_LEASES, uid .. '|' .. string.sub(f, 3)))
      if exp and exp > best then best = exp end
    end
  end
  return best
end

-- A user's hash lives as long as they are listed, then METADATA_TTL more: no expiry is kept
-- (and paid for) while they are online.
local function keep_user(uk, listed)
  if listed then redis.call('PERSIST', uk) else redis.call('EXPIRE', uk, META_TTL) end
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
local function mark_active(uid, uk, u)
  local la = num(u.la)
  local was_idle = u.idle == '1' or (la ~= nil and NOW - la >= IDLE_AFTER)
  redis.call('HSET', uk, 'la', NOW)
  redis.call('HDEL', uk, 'idle')
  u.la = tostring(NOW); u.idle = nil
  redis.call('ZADD', K_ACTIVE, NOW, uid)
  return was_idle
end
