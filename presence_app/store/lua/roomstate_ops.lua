-- The operations of roomstate.lua (both layouts), after the layout's own `key` and
-- `conn_in_room(uid, cid)`: whether a connection's entry counts (lua/roomstate.lua,
-- lua3/roomstate.lua).
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
