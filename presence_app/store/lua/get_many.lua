-- get_many(ids): what a user's presence is made of, read in one pass for plans.py to derive it
-- (Presence.deriver). ARGV[A]: the user ids joined by "\n" (ids are printable: no "\n"): one
-- argument to pack, not one per user. Returns the clock, then per 1,000 users four lists: their
-- seen scores, hidden scores and K_UNTIL entries (both empty while that index is, as it mostly
-- is) and their records. Redis' own replies, passed through: no per-user work but the key names.
local ids = {}
for uid in string.gmatch(ARGV[A], '[^\n]+') do ids[#ids + 1] = uid end
local any_hidden = redis.call('EXISTS', K_HIDDEN) == 1
local any_until = redis.call('EXISTS', K_UNTIL) == 1
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
end
return out
