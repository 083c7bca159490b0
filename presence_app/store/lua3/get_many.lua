-- get_many(ids): as layout 2's, plus the last seen of offline users. ARGV[A]: the ids joined by
-- "\n". Returns the clock, then per 1,000 users five lists: seen scores, hidden scores, K_UNTIL
-- entries, records and K_LAST scores (the 2nd, 3rd and 5th empty while their index is).
local ids = {}
for uid in string.gmatch(ARGV[A], '[^\n]+') do ids[#ids + 1] = uid end
local any_hidden = redis.call('EXISTS', K_HIDDEN) == 1
local any_until = redis.call('EXISTS', K_UNTIL) == 1
local any_last = redis.call('EXISTS', K_LAST) == 1
local out = {sc(NOW)}
for first = 1, #ids, 1000 do
  local chunk, keys = {}, {}
  for i = first, math.min(first + 999, #ids) do
    chunk[#chunk + 1] = ids[i]; keys[#keys + 1] = ukey(ids[i])
  end
  out[#out + 1] = redis.call('ZMSCORE', K_SEEN, unpack(chunk))
  out[#out + 1] = any_hidden and redis.call('ZMSCORE', K_HIDDEN, unpack(chunk)) or {}
  out[#out + 1] = any_until and redis.call('ZMSCORE', K_UNTIL, unpack(chunk)) or {}
  out[#out + 1] = redis.call('MGET', unpack(keys))
  out[#out + 1] = any_last and redis.call('ZMSCORE', K_LAST, unpack(chunk)) or {}
end
return out
