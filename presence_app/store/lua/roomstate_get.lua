-- roomstate_get(room): this shard's live states in a room, flat {user, public id, json, ...}.
-- An entry whose connection's lease is gone (or, for server state, whose user left the room) is
-- removed here, in the same script that checks it: a crashed process leaves no ghost. Entries
-- of users not listed in the room (invisible ones) are kept but not returned.
local room = ARGV[A]
local key = TAG .. ':rs:' .. esc(room)
local flat = redis.call('HGETALL', key)
local out, dead = {}, {}
for i = 1, #flat, 2 do
  local field, value = flat[i], flat[i + 1]
  local uid, pub = split_member(field)
  local cid, data = string.match(value, '^([^\n]*)\n(.*)$')
  local member = uid and redis.call('ZSCORE', rkey(room), uid)
  if uid == nil or cid == nil then
    dead[#dead + 1] = field
  elseif cid ~= '' then
    local exp = num(redis.call('ZSCORE', K_LEASES, uid .. '|' .. cid))
    if exp == nil or exp < NOW then dead[#dead + 1] = field
    elseif member then out[#out + 1] = uid; out[#out + 1] = pub; out[#out + 1] = data end
  elseif not member then
    dead[#dead + 1] = field
  else
    out[#out + 1] = uid; out[#out + 1] = pub; out[#out + 1] = data
  end
end
if #dead > 0 then redis.call('HDEL', key, unpack(dead)) end
return out
