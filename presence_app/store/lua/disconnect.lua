-- disconnect(user, conn): a clean close. The connection is held through the grace (its rooms
-- too: a reload within it shows no leave and no join); with no other connection left the user's
-- presence ends with the grace (K_UNTIL), or with their HTTP window when that is later (a request
-- while connected: the registry field's or the record's window end), which a reconnect clears
-- and the sweep announces.
local uid, cid = ARGV[A], ARGV[A + 1]
renew_proc()
local u = load_user(uid)
local idx = index_of(u.st)
local score = num(redis.call('ZSCORE', idx, uid))
local listed = score ~= nil and score > 0  -- (a negative one: HTTP only, no connection)
local p, c, la, rw = registry_of(uid)
if not listed then
  if c == cid then registry_del(uid) end  -- what an eviction left behind
  return transitions()
end
local conns = live_conns(uid, u, true)
local e = conns[cid]
if e == nil then  -- not live: an inert field of its, left by an eviction, goes
  if c == cid then registry_del(uid) end
  return transitions()
end
if string.sub(e[1], 1, 1) == '~' then return transitions() end
local others = false
for other, f in pairs(conns) do
  if other ~= cid and string.sub(f[1], 1, 1) ~= '~' then others = true end
end
if #e > 1 then
  local closing = {'~' .. sc(NOW + GRACE)}
  for i = 2, #e do closing[#closing + 1] = e[i] end
  conns[cid] = closing
else
  conns[cid] = nil
end
local window = window_end(rw, u.w)
redis.call('ZADD', idx, 'GT', sc(NOW), uid)  -- the close is a sign of life (copied: save_user)
keep_conns(uid, u, conns, la or u.la, true, idx == K_SEEN and math.max(score, NOW))
schedule_graces(uid, conns)
if not others then
  redis.call('ZADD', K_UNTIL, sc(math.max(NOW + GRACE, num(window) or 0)), uid)
else
  outlast_until(uid)
end
return transitions()
