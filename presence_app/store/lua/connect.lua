-- connect(user, conn, device, most): a WebSocket opened on this process. A plain user's one
-- connection goes into the registry; a second one (or rooms) moves them into the record. Counts
-- as activity (an idle user is active again). With `most` > 0, refused (an error, nothing
-- written) while the user holds that many open connections already, this one not counted (a
-- resumed stream takes its own back): counted here, two opens at once cannot both pass.
local uid, cid, device, most = ARGV[A], ARGV[A + 1], ARGV[A + 2], num(ARGV[A + 3]) or 0
renew_proc()
if erased(uid) then return transitions() end  -- nothing is held: its heartbeat reports it missing
local u = load_user(uid)
local idx = index_of(u.st)
local score = num(redis.call('ZSCORE', idx, uid))
local listed = score ~= nil and score > 0  -- (a negative one: HTTP only, WEB)
local conns = live_conns(uid, u, listed)
if most > 0 then
  local open = 0
  for c, e in pairs(conns) do
    if c ~= cid and string.sub(e[1], 1, 1) ~= '~' then open = open + 1 end  -- not in a grace
  end
  if open >= most then return redis.error_reply('PRESENCE too many connections') end
end
-- a user seen by HTTP only so far is connected now: listed by their connections from here on
-- (the ZADD GT below replaces their negative web score)
local web = score ~= nil and score < 0 and -score or nil
local by_web = web ~= nil
-- their HTTP window (or a grace's end) holds them still once this connection closes: it goes
-- with their connections (keep_conns), and K_UNTIL's entry ends below
local ending = num(redis.call('ZSCORE', K_UNTIL, uid))
local held = window_end(web and sc(web + WINDOW), ending and sc(ending))
u.w = window_end(u.w, held)
local was_idle = u.idle == '1'
u.idle = nil
local entry, before = {PROC}, conns[cid]
if before then  -- the same connection again (a resumed stream, in its grace): its rooms stay
  for i = 2, #before do entry[#entry + 1] = before[i] end
end
conns[cid] = entry
if device ~= '' then u.dev = device end
redis.call('ZADD', idx, 'GT', sc(NOW), uid)  -- before the record's save: it copies the score
keep_conns(uid, u, conns, sc(NOW), true, idx == K_SEEN and math.max(listed and score or 0, NOW))
-- a reload within the grace ends it here; a window that ends later than this connection's span
-- (ONLINE_WINDOW > LEASE_TTL) is their end until a heartbeat carries them past it
if held and num(held) > NOW + SPAN then redis.call('ZADD', K_UNTIL, held, uid)
elseif ending then redis.call('ZREM', K_UNTIL, uid) end
schedule_graces(uid, conns)
if idx == K_SEEN then
  if not listed and not by_web then emit('online', uid, nil, public_state(u), NOW, u, NONE)
  elseif was_idle then emit('update', uid, nil, public_state(u), NOW, u, rooms_in(conns)) end
end
return transitions()
