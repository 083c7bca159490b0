-- room(room): this shard's visible members of a room with the time they came, leaving out users
-- whose presence ran out before the sweep got to them.
local room = ARGV[A]
local flat = redis.call('ZRANGE', rkey(room), 0, -1, 'WITHSCORES')
if #flat == 0 then return {} end
local uids = {}
for i = 1, #flat, 2 do uids[#uids + 1] = flat[i] end
local out = {}
for first = 1, #uids, 1000 do
  local chunk = {}
  for i = first, math.min(first + 999, #uids) do chunk[#chunk + 1] = uids[i] end
  local untils = redis.call('ZMSCORE', K_ONLINE, unpack(chunk))
  for j, uid in ipairs(chunk) do
    if untils[j] and tonumber(untils[j]) >= NOW then
      out[#out + 1] = uid; out[#out + 1] = flat[2 * (first + j - 1)]
    end
  end
end
return out
