-- idle(user): called by the process whose connection of the user saw no activity for
-- IDLE_AFTER. The user goes idle only when their latest activity on every device (the registry
-- field's, the record's) is that old too: otherwise another device is active, and its own
-- process will call when it stops. Idle is a flag in the record, with the last activity.
local uid = ARGV[A]
local u = load_user(uid)
local idx = index_of(u.st)
local score = conn_score(idx, uid)  -- (an HTTP-only user's idle comes with their requests)
if u.idle == '1' or not score then return transitions() end
local _, _, la = registry_of(uid)
local latest = math.max(num(la) or 0, num(u.la) or 0)
if NOW - latest < IDLE_AFTER then return transitions() end
u.idle = '1'
u.la = sc(latest)
save_user(uid, u, true, idx == K_SEEN and score)
if idx == K_SEEN and u.st ~= 'dnd' then
  emit('update', uid, nil, public_state(u), NOW, u, rooms_in(live_conns(uid, u, true)))
end
return transitions()
