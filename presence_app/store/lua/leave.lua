-- leave(user, conn, room): the connection leaves a room; the room hears of it when this was the
-- user's last connection there.
local uid, cid, room = ARGV[A], ARGV[A + 1], ARGV[A + 2]
local u = load_user(uid)
local idx = index_of(u.st)
local score = conn_score(idx, uid)  -- (an HTTP-only user, WEB, holds no connection)
local listed = score ~= nil
local conns = live_conns(uid, u, listed)
local e = conns[cid]
if e == nil then return transitions() end
local found = false
for i = 2, #e do
  if e[i] == room then table.remove(e, i); found = true; break end
end
local _, _, la = registry_of(uid)
keep_conns(uid, u, conns, la or u.la, true, idx == K_SEEN and score)  -- also drops dead connections (rooms left)
schedule_graces(uid, conns)
if not found then return transitions() end
local still = false
for _, r in ipairs(rooms_in(conns)) do if r == room then still = true end end
if not still and room_remove(uid, room) then emit('leave', uid, room, public_state(u), NOW, u) end
return transitions()
