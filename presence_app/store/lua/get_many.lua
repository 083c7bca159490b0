-- get_many(ids): ARGV[A]: the ids as a JSON array (at most 1,000: Python splits longer lists);
-- Redis' C JSON decoder splits them in half the time a Lua loop takes.
-- One short read: the clock; a code an id: "1" for a user connected and within their lease
-- (seen within SPAN, no K_UNTIL end) with no record (online: nothing more to send), "2" for
-- such a user with a record, "3" for an HTTP-only user within their window (no seen or hidden
-- score, a web score within WINDOW) with no record (online: their web score is their last
-- activity), "0" for the others; the records of the "2"s and "0"s (fields of K_RECS: no key a
-- user to build), in their order, joined by \30 into one string ('' for a "0" with none: a
-- record is never empty, and no field of one holds a control character but \31); the web
-- scores of the "3"s, in their order, joined by spaces; for the "0"s, in their order, their
-- seen scores and their K_UNTIL ends (empty while K_UNTIL is); and for the "0"s with no seen
-- score, in their order, their hidden, web and K_LAST scores (K_LAST's read only for those
-- with neither of the others; each list empty when no "0" lacks a seen score). One string
-- for the many records and scores of a page, not one each: the reply's parts are what a page
-- of them costs Redis, the client's parser and Python. Python derives the rest (derive.py).
-- ARGV[A + 1], when given: the ids' registry buckets (a JSON array, keys.registry_bucket), and
-- the reply ends with each id's registry field (false where none, and for the users not
-- connected), whose last activity is a connected plain user's: an HGET a connected user, read
-- only by the reads that show it.
local ids = cjson.decode(ARGV[A])
local seen = redis.call('ZMSCORE', K_SEEN, unpack(ids))
local ends = redis.call('EXISTS', K_UNTIL) == 1 and redis.call('ZMSCORE', K_UNTIL, unpack(ids)) or {}
local records = redis.call('HMGET', K_RECS, unpack(ids))
local missing = {}  -- the ids with no seen score
for i = 1, #ids do
  if not seen[i] then missing[#missing + 1] = ids[i] end
end
local function scores(key, which)
  if #which == 0 or redis.call('EXISTS', key) == 0 then return {} end
  return redis.call('ZMSCORE', key, unpack(which))
end
local hidden, web = scores(K_HIDDEN, missing), scores(K_WEB, missing)
local codes, seen2, ends2, records2, webs3 = {}, {}, {}, {}, {}
local hidden2, web2, last2, unknown, at = {}, {}, {}, {}, {}
local has_ends, k, n, m = #ends > 0, 0, 0, 0
for i = 1, #ids do
  local s, r = seen[i], records[i]
  if s then
    if not (has_ends and ends[i]) and tonumber(s) + SPAN >= NOW then  -- within their lease
      if r then
        codes[i], n = '2', n + 1
        records2[n] = r
      else
        codes[i] = '1'
      end
    else
      codes[i], n, k = '0', n + 1, k + 1
      records2[n], seen2[k] = r or '', s
      if has_ends then ends2[k] = ends[i] end
    end
  else
    m = m + 1
    local h, w = hidden[m] or false, web[m] or false
    if not (h or r) and w and tonumber(w) + WINDOW >= NOW then  -- HTTP only, within their window
      codes[i] = '3'
      webs3[#webs3 + 1] = w
    else
      codes[i], n, k = '0', n + 1, k + 1
      records2[n], seen2[k] = r or '', false
      if has_ends then ends2[k] = ends[i] end
      local j = #hidden2 + 1
      hidden2[j], web2[j], last2[j] = h, w, false
      if not (h or w) then  -- their last seen, if the sweep wrote one
        unknown[#unknown + 1] = ids[i]
        at[#unknown] = j
      end
    end
  end
end
for j, v in ipairs(scores(K_LAST, unknown)) do last2[at[j]] = v end
local out = {sc(NOW), table.concat(codes), table.concat(records2, '\30'), table.concat(webs3, ' '),
  seen2, ends2, hidden2, web2, last2}
if ARGV[A + 1] then  -- the registry fields of the connected (seen or hidden) only
  local buckets, fields, mm = cjson.decode(ARGV[A + 1]), {}, 0
  for i = 1, #ids do
    local connected = seen[i]
    if not connected then
      mm = mm + 1
      connected = hidden[mm]
    end
    fields[i] = connected and redis.call('HGET', TAG .. ':c:' .. buckets[i], ids[i]) or false
  end
  out[10] = fields
end
return out
