-- activity(user): the person did something on a live connection: a sign of life, their last
-- activity (the registry field of a plain user, the record otherwise) and the end of an idle the
-- record holds. Unlisted users are left alone.
local uid = ARGV[A]
local u = load_user(uid)
local idx = index_of(u.st)
local score = conn_score(idx, uid)  -- (an HTTP-only user, WEB, has no live connection)
if not score then return transitions() end
redis.call('ZADD', idx, 'GT', sc(NOW), uid)
local was_idle = u.idle == '1'
local p, c, la, w = registry_of(uid)
if not registry_live(uid, p, la) then p = nil end
if p then registry_set(uid, p, c, sc(NOW), w) end
if p and next(conns_of(u)) == nil then u.la = nil else u.la = sc(NOW) end
if redis.call('ZSCORE', K_UNTIL, uid) then  -- an end that this sign of life may outlast
  local open = p ~= nil
  for _, e in pairs(live_conns(uid, u, true)) do open = open or string.sub(e[1], 1, 1) ~= '~' end
  if open then outlast_until(uid) end
end
u.idle = nil
save_user(uid, u, true, idx == K_SEEN and math.max(score, NOW))
if was_idle and idx == K_SEEN then
  emit('update', uid, nil, public_state(u), NOW, u, rooms_in(live_conns(uid, u, true)))
end
return transitions()
