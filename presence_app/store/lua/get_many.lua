-- get_many(users...): what a user's presence is made of, read in one pass for plans.py to derive
-- it (Presence.from_raw): the clock, then for each user their seen and hidden scores, their
-- K_UNTIL entry and their record. Four commands per 1,000 users, no per-user work.
local out = {sc(NOW)}
for first = A, #ARGV, 1000 do
  local ids, keys = {}, {}
  for i = first, math.min(first + 999, #ARGV) do
    ids[#ids + 1] = ARGV[i]; keys[#keys + 1] = ukey(ARGV[i])
  end
  local seen = redis.call('ZMSCORE', K_SEEN, unpack(ids))
  local hidden = redis.call('ZMSCORE', K_HIDDEN, unpack(ids))
  local ends = redis.call('ZMSCORE', K_UNTIL, unpack(ids))
  local records = redis.call('MGET', unpack(keys))
  local k = #out
  for n = 1, #ids do
    out[k + 1] = seen[n]; out[k + 2] = hidden[n]; out[k + 3] = ends[n]; out[k + 4] = records[n]
    k = k + 4
  end
end
return out
