-- roomstate('set', room, user, public id, conn, json, ...) / roomstate('get', room): in this
-- shard's hash of the room: field "user|public id" -> "conn\n" ..
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
local function listed(uid) return redis.call('ZSCORE', rkey(room), uid) ~= false end

if op == 'set' then
  local done = 0
  for i = A + 2, #ARGV, 4 do
    local uid, pub, cid, data = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    local field = uid .. '|' .. pub
    if data == '' then
      done = done + redis.call('HDEL', key, field)
    elseif (cid ~= '' and conn_in_room(uid, cid)) or (cid == '' and listed(uid)) then
      redis.call('HSET', key, field, cid .. '\n' .. data)
      done = done + 1
    end
  end
  -- A room nobody writes to for a day loses its states; reads prune dead entries before that.
  if done > 0 then redis.call('EXPIRE', key, 86400) end
  return done
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
