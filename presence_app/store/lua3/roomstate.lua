-- roomstate('set', room, user, public id, conn, json, ...) / roomstate('get', room): layout 2's
-- (lua/roomstate.lua), in this shard's hash of the room: field "user|public id" -> "conn\n" ..
-- json (conn '' for state the server sets for a user).
--
-- A connection's entry counts only while the connection is in the room and its process lives
-- (a user in a room keeps their connections in their record: {conn: [process, room, ...]}; a
-- closed one's process is "~<end of its grace>"); server state only while its user is in the
-- room. 'set' writes nothing otherwise, json '' removes the entry, and returns how many entries
-- changed. 'get' returns {user, public id, json, ...} of the live entries of users listed in the
-- room (not invisible ones) and removes the dead ones in the same script: a killed process's
-- entries go with its lease.
local op, room = ARGV[A], ARGV[A + 1]
local key = TAG .. ':rs:' .. esc(room)
local records = {}
local function conn_in_room(uid, cid)
  local u = records[uid]
  if u == nil then u = decode(record(uid)); records[uid] = u end
  local entry = conns_of(u)[cid]
  if type(entry) ~= 'table' or not proc_alive(entry[1]) then return false end
  for i = 2, #entry do if entry[i] == room then return true end end
  return false
end
