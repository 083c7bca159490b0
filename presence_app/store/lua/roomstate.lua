-- roomstate('set', room, user, public id, conn, json, ...) / roomstate('get', room): per-member
-- live state in a room (cursors, selections), in this shard's hash of the room: field
-- "user|public id" -> "conn\n" .. json (conn '' for state the server sets for a user).
--
-- A connection's entry counts only while it holds a live lease and is in the room; server state
-- only while its user is in the room. 'set' writes nothing otherwise (a write racing a leave or a
-- close leaves no ghost), json '' removes the entry, and returns how many entries changed.
-- 'get' returns {user, public id, json, ...} of the live entries of users listed in the room
-- (not invisible ones) and removes the dead ones in the same script: a crashed process's
-- entries go with its lease.
local op, room = ARGV[A], ARGV[A + 1]
local key = TAG .. ':rs:' .. esc(room)
local records = {}
local function conn_in_room(uid, cid)
  local exp = num(redis.call('ZSCORE', K_LEASES, uid .. '|' .. cid))
  if exp == nil or exp < NOW then return false end
  local u = records[uid]
  if u == nil then u = read_user(uid); records[uid] = u end
  for _, r in ipairs(conns_of(u)[cid] or NONE) do if r == room then return true end end
  return false
end
