-- room(room[, id...]): this shard's visible members of a room with the time they came, leaving
-- out users whose presence ran out before the sweep got to them; with ids, only those of them
-- (a lookup each, not the whole room).
local room = ARGV[A]
local flat
if #ARGV > A then
  flat = {}
  for first = A + 1, #ARGV, 1000 do  -- (unpack's bound)
    local ids = {}
    for i = first, math.min(first + 999, #ARGV) do ids[#ids + 1] = ARGV[i] end
    local came = redis.call('ZMSCORE', rkey(room), unpack(ids))
    for j, uid in ipairs(ids) do
      if came[j] then flat[#flat + 1] = uid; flat[#flat + 1] = came[j] end
    end
  end
else
  flat = redis.call('ZRANGE', rkey(room), 0, -1, 'WITHSCORES')
end
local out = {}
for first = 1, #flat, 2000 do
  local chunk = {}
  for i = first, math.min(first + 1999, #flat), 2 do chunk[#chunk + 1] = flat[i] end
  local seen = redis.call('ZMSCORE', K_SEEN, unpack(chunk))
  local ends = redis.call('ZMSCORE', K_UNTIL, unpack(chunk))
  for j, uid in ipairs(chunk) do
    local s, e = num(seen[j]), num(ends[j])
    if s and s > 0 and (e or s + SPAN) >= NOW then  -- (a negative score: HTTP only, WEB)
      out[#out + 1] = uid; out[#out + 1] = flat[first + 2 * j - 1]
    end
  end
end
return out
