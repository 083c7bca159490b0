-- get_many(ids): ARGV[A]: the ids as a JSON array (at most 1,000: Python splits longer lists);
-- Redis' C JSON decoder splits them in half the time a Lua loop takes.
-- One short read: the clock; a code an id: "1" for a user connected and within their lease
-- (seen within SPAN, no K_UNTIL end) with no record (online: nothing more to send), "2" for
-- such a user with a record, "0" for the others; the records of the "2"s and "0"s (fields of
-- K_RECS: no key a user to build), in their order; for the "0"s, in their order, their seen
-- scores and their K_UNTIL ends (empty while K_UNTIL is); and for the ids with no seen score, in
-- their order, their hidden, web and K_LAST scores (each empty while its index is, or when every
-- id has a seen score). Python derives the rest (plans3.deriver3).
-- ARGV[A + 1], when given: the ids' registry buckets (a JSON array, keys.registry_bucket), and
-- the reply ends with each id's registry field (false where none, and for the users not
-- connected), whose last activity is a connected plain user's: an HGET a connected user, read
-- only by the reads that show it.
local ids = cjson.decode(ARGV[A])
local seen = redis.call('ZMSCORE', K_SEEN, unpack(ids))
local ends = redis.call('EXISTS', K_UNTIL) == 1 and redis.call('ZMSCORE', K_UNTIL, unpack(ids)) or {}
local records = redis.call('HMGET', K_RECS, unpack(ids))
local codes, seen2, ends2, records2, missing = {}, {}, {}, {}, {}
local has_ends, k, n = #ends > 0, 0, 0
for i = 1, #ids do
  local s, r = seen[i], records[i]
  if s and not (has_ends and ends[i]) and tonumber(s) + SPAN >= NOW then  -- within their lease
    if r then
      codes[i], n = '2', n + 1
      records2[n] = r
    else
      codes[i] = '1'
    end
  else
    codes[i], n, k = '0', n + 1, k + 1
    records2[n], seen2[k] = r, s
    if has_ends then ends2[k] = ends[i] end
    if not s then missing[#missing + 1] = ids[i] end
  end
end
local function scores(key)
  if #missing == 0 or redis.call('EXISTS', key) == 0 then return {} end
  return redis.call('ZMSCORE', key, unpack(missing))
end
local hidden = scores(K_HIDDEN)
local out = {sc(NOW), table.concat(codes), records2, seen2, ends2, hidden, scores(K_WEB),
  scores(K_LAST)}
if ARGV[A + 1] then  -- the registry fields of the connected (seen or hidden) only
  local buckets, fields, m = cjson.decode(ARGV[A + 1]), {}, 0
  for i = 1, #ids do
    local connected = seen[i]
    if not connected then
      m = m + 1
      connected = hidden[m]
    end
    fields[i] = connected and redis.call('HGET', TAG .. ':c:' .. buckets[i], ids[i]) or false
  end
  out[9] = fields
end
return out
