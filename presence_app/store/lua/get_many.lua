-- get_many(ids): what a user's presence is made of, read in one pass for plans.py to derive it
-- (Presence.deriver). ARGV[A]: the user ids joined by "\n" (ids are printable: no "\n"). Returns
-- one string, the clock and then, for each user, their seen and hidden scores, their K_UNTIL
-- entry and their record, fields split by \31 and users by \30 (neither can occur in a record:
-- status text refuses control characters, JSON escapes them). One argument in and one string
-- out, not 200 and 800: packing and parsing them, not Redis, was most of a read's cost.
-- Four commands per 1,000 users at most, no per-user work but the key names; the hidden and
-- K_UNTIL lookups are skipped while those indexes are empty (most of the time).
local ids = {}
for uid in string.gmatch(ARGV[A], '[^\n]+') do ids[#ids + 1] = uid end
local any_hidden = redis.call('EXISTS', K_HIDDEN) == 1
local any_until = redis.call('EXISTS', K_UNTIL) == 1
local out, k = {sc(NOW)}, 1
for first = 1, #ids, 1000 do
  local last = math.min(first + 999, #ids)
  local chunk, keys = {}, {}
  for i = first, last do chunk[#chunk + 1] = ids[i]; keys[#keys + 1] = ukey(ids[i]) end
  local seen = redis.call('ZMSCORE', K_SEEN, unpack(chunk))
  local hidden = any_hidden and redis.call('ZMSCORE', K_HIDDEN, unpack(chunk)) or {}
  local ends = any_until and redis.call('ZMSCORE', K_UNTIL, unpack(chunk)) or {}
  local records = redis.call('MGET', unpack(keys))
  for n = 1, #chunk do
    out[k + 1] = '\30'; out[k + 2] = seen[n] or ''; out[k + 3] = '\31'; out[k + 4] = hidden[n] or ''
    out[k + 5] = '\31'; out[k + 6] = ends[n] or ''; out[k + 7] = '\31'; out[k + 8] = records[n] or ''
    k = k + 8
  end
end
return table.concat(out)
