-- set_status(user, state, updates): 'auto' | 'dnd' |
-- 'invisible' ('' keeps it) and the fields in updates (JSON: msg, emoji, dev, meta, mx or mx+;
-- null deletes). A status is the user's record: it exists while the user differs from the
-- default. Going invisible reads to the public as leaving every room and going offline; coming
-- back, as online and joining them again.
-- ARGV[A + 3], when given: the user's registry bucket; the reply is then {transitions, the
-- user's read after the write (read.lua, as get_many with their bucket)}, so that the user's
-- own devices learn their true state without a second call, which a Redis Cluster client
-- could run before this one.
local uid, state, updates = ARGV[A], ARGV[A + 1], cjson.decode(ARGV[A + 2])
local back = ARGV[A + 3]
-- What the public sees of user u (a change of it is announced), and this call's change of u.
local function shown(u)
  return public_state(u) .. '\n' .. (live_message(u, 'msg') or '') .. '\n'
    .. (live_message(u, 'emoji') or '')
end
local function apply(u)
  if state == 'auto' then u.st = nil elseif state ~= '' then u.st = state end
  for f, v in pairs(updates) do
    if f == 'mx+' then f, v = 'mx', sc(NOW + v) end
    if v == cjson.null then u[f] = nil else u[f] = v end
  end
end
-- The common case answered here, before the rest of the library's definitions are made (issue
-- 43, as join.lua's): no read back asked, a visible user staying visible (state '', 'auto' or
-- 'dnd'; the fields of updates those of a status), whose score is a connection's (positive)
-- and every connection of whose record is live (a process's running lease, a grace not over).
-- The full path below would then do what this part does: announce an update to what the
-- public sees (while the user is present) with their live connections' rooms, and save the
-- record. Otherwise the full path goes on with what was read here (PRE_RAW, PRE_SEEN, PRE_ENDS).
local EARLY = true
local PRE_READ, PRE_RAW, PRE_SEEN, PRE_ENDS = false, nil, nil, nil
local SHOWN_FIELDS = {msg = true, emoji = true, dev = true, meta = true, mx = true, ['mx+'] = true}
if EARLY and not back and (state == '' or state == 'auto' or state == 'dnd') and not erased(uid) then
  PRE_READ = true
  PRE_RAW = redis.call('HGET', K_RECS, uid)
  local u = decode(PRE_RAW)
  local quick = u.st ~= 'invisible'
  for f, _ in pairs(updates) do quick = quick and SHOWN_FIELDS[f] ~= nil end
  if quick then
    PRE_SEEN = tonumber(redis.call('ZSCORE', K_SEEN, uid)) or false
    quick = PRE_SEEN and PRE_SEEN > 0
  end
  if quick then
    PRE_ENDS = tonumber(redis.call('ZSCORE', K_UNTIL, uid)) or false
    for _, e in pairs(conns_of(u)) do quick = quick and proc_alive(e[1]) end
  end
  if quick then
    local before = shown(u)
    apply(u)
    if (PRE_ENDS or PRE_SEEN + SPAN) >= NOW and shown(u) ~= before then
      emit('update', uid, nil, public_state(u), NOW, u, rooms_in(conns_of(u)))
    end
    save_user(uid, u, true, PRE_SEEN)
    return transitions()
  end
end
-- (the library)
local function answer()
  if not back then return transitions() end
  return {transitions(), read_many({uid}, {back})}
end
if not PRE_READ and erased(uid) then return answer() end
local u
if PRE_READ then u = user_of(uid, PRE_RAW) else u = load_user(uid) end
local old_idx = index_of(u.st)
local seen
if PRE_SEEN ~= nil and old_idx == K_SEEN then seen = PRE_SEEN or nil
else seen = num(redis.call('ZSCORE', old_idx, uid)) end
local ends = nil
-- an HTTP-only user: their web score negated in K_SEEN (WEB), their presence ends
-- ONLINE_WINDOW after their request (never in K_UNTIL)
local web = old_idx == K_SEEN and seen ~= nil and seen < 0 and -seen or nil
if web then seen, ends = web, web + WINDOW
elseif PRE_ENDS ~= nil then ends = PRE_ENDS or nil
else ends = num(redis.call('ZSCORE', K_UNTIL, uid)) end
local live = seen ~= nil and (ends or seen + SPAN) >= NOW
local listed = seen ~= nil
-- The rooms of the user's live connections: their record's (a registry field's connection holds
-- no room, so the field is not read here).
local function rooms_now()
  local out = {}
  for c, e in pairs(conns_of(u)) do if proc_alive(e[1]) then out[c] = e end end
  return rooms_in(out)
end
if listed and not web then
  -- a change of the user's: the dead connections of their record (a killed process's, an ended
  -- grace's) go, and the rooms only those held, as connect, disconnect, join and leave do. A
  -- dead registry field holds no room and counts for nothing: it is left to its connection's
  -- disconnect or the sweep's cleaner (a record holding connections has no field: load_user)
  local dead = false
  for _, e in pairs(conns_of(u)) do dead = dead or not proc_alive(e[1]) end
  if dead then
    local conns = live_conns(uid, u, true)
    keep_conns(uid, u, conns, u.la, true, old_idx == K_SEEN and seen)
    schedule_graces(uid, conns)
  end
end
local before = shown(u)
apply(u)
local new_idx = index_of(u.st)

if new_idx == K_HIDDEN and old_idx == K_SEEN then
  local last = live and NOW or math.max(num(u.ls) or 0, seen or 0)
  if last > 0 then u.lv = sc(last) else u.lv = nil end
  if listed then
    for _, room in ipairs(rooms_now()) do
      if room_remove(uid, room) then emit('leave', uid, room, 'offline', NOW, u) end
    end
    redis.call('ZREM', K_SEEN, uid)
    redis.call('ZADD', K_HIDDEN, sc(seen), uid)
    if web then  -- hidden, their window as their end
      redis.call('ZADD', K_UNTIL, sc(ends), uid)
    end
    emit('offline', uid, nil, 'offline', last, u, {})
  end
elseif new_idx == K_SEEN and old_idx == K_HIDDEN then
  u.lv = nil
  if listed then
    if not live then
      -- Expired while hidden and not swept yet: finished off silently here.
      redis.call('ZREM', K_HIDDEN, uid)
      redis.call('ZREM', K_UNTIL, uid)
      redis.call('ZREM', K_GRACES, uid)
      redis.call('ZADD', K_LAST, sc(seen), uid)
      forget_cached()
      registry_del(uid)
      u._c = {}
      save_user(uid, u, false)
      return answer()
    end
    redis.call('ZREM', K_HIDDEN, uid)
    redis.call('ZADD', K_SEEN, sc(seen), uid)
    local rooms = rooms_now()
    emit('online', uid, nil, public_state(u), NOW, u, rooms)
    for _, room in ipairs(rooms) do
      if room_add(uid, room) then emit('join', uid, room, public_state(u), NOW, u) end
    end
  end
elseif new_idx == K_SEEN and live then
  if shown(u) ~= before then
    emit('update', uid, nil, public_state(u), NOW, u, rooms_now())
  end
end
-- the score to copy (save_user): a connected visible user's, unchanged here or back from hidden
save_user(uid, u, listed, new_idx == K_SEEN and not web and seen)
return answer()
