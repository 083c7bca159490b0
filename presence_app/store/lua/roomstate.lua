-- roomstate('typing', room, user, conn): whether the room hears the user typing (below).
-- roomstate('set', room, user, public id, conn, json, ...) / roomstate('get', room): in this
-- shard's hash of the room: field "user|public id" -> "conn\n" ..
-- json (conn '' for state the server sets for a user).
--
-- A connection's entry counts only while the connection is in the room and its process lives
-- (a user in a room keeps their connections in their record: {conn: [process, room, ...]}; a
-- closed one's process is "~<end of its grace>"); server state only while its user is in the
-- room, and never for a user the room does not list (an invisible one). 'set' writes nothing
-- otherwise, json '' removes the entry, and returns which entries changed. 'get' returns {user, public id, json, ...} of the live entries of users listed in the
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
local function listed(uid) return redis.call('ZSCORE', rkey(room), uid) ~= false end

if op == 'typing' then
  -- May this connection tell the room its user is typing? Only from a connection in the room, of
  -- a user the room lists (visible): their public state ('online', 'dnd') or '' (refused).
  local uid, cid = ARGV[A + 2], ARGV[A + 3]
  if not (listed(uid) and conn_in_room(uid, cid)) then return '' end
  if records[uid].st == 'dnd' then return 'dnd' end
  return 'online'
end

if op == 'set' then
  -- Per entry '1' (written, or removed) or '0' (refused, or nothing to remove): a state is taken
  -- only from a user the room lists (visible: an invisible user is in no room's list) and, for
  -- a connection's, from a connection in the room whose process lives.
  local done = {}
  for i = A + 2, #ARGV, 4 do
    local uid, pub, cid, data = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    local field = uid .. '|' .. pub
    if data == '' then
      done[#done + 1] = redis.call('HDEL', key, field) == 1 and '1' or '0'
    elseif listed(uid) and (cid == '' or conn_in_room(uid, cid)) then
      redis.call('HSET', key, field, cid .. '\n' .. data)
      done[#done + 1] = '1'
    else
      done[#done + 1] = '0'
    end
  end
  local flags = table.concat(done)
  -- A room nobody writes to for a day loses its states; reads prune dead entries before that.
  if string.find(flags, '1', 1, true) then redis.call('EXPIRE', key, 86400) end
  return flags
end

local flat = redis.call('HGETALL', key)
local out, dead = {}, {}
for i = 1, #flat, 2 do
  local field, value = flat[i], flat[i + 1]
  local uid, pub = split_member(field)
  local cid, data = string.match(value, '^([^\n]*)\n(.*)$')
  local live = uid ~= nil and cid ~= nil
  if live and cid ~= '' then live = conn_in_room(uid, cid)
  elseif live then live = listed(uid) end
  if not live then
    dead[#dead + 1] = field
  elseif cid == '' or listed(uid) then
    out[#out + 1] = uid; out[#out + 1] = pub; out[#out + 1] = data
  end
end
if #dead > 0 then redis.call('HDEL', key, unpack(dead)) end
return out
