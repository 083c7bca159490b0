-- roomstate_set(room, user, public id, conn, json, ...): the latest live state of connections
-- (or, with conn '', of the server for a user) in a room, in this shard's hash of the room:
-- field "user|public id" -> "conn\n" .. json; json '' removes the entry. A connection without a
-- live lease writes nothing (no ghosts), nor does server state for a user not in the room.
-- Returns how many entries were written or removed.
local room = ARGV[A]
local key = TAG .. ':rs:' .. esc(room)
local done = 0
for i = A + 1, #ARGV, 4 do
  local uid, pub, cid, data = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local field = uid .. '|' .. pub
  if data == '' then
    done = done + redis.call('HDEL', key, field)
  else
    local ok
    if cid ~= '' then
      local exp = num(redis.call('ZSCORE', K_LEASES, uid .. '|' .. cid))
      ok = exp ~= nil and exp >= NOW
    else
      ok = redis.call('ZSCORE', rkey(room), uid) ~= false
    end
    if ok then
      redis.call('HSET', key, field, cid .. '\n' .. data)
      done = done + 1
    end
  end
end
-- A room nobody writes to for a day loses its states; reads prune dead entries before that.
if done > 0 then redis.call('EXPIRE', key, 86400) end
return done
