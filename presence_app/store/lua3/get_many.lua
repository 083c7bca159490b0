-- get_many(ids): as layout 2's, plus the last seen of offline users and whether each user's
-- listing is live. ARGV[A]: the ids joined by "\n". Returns the clock, then per 1,000 users six
-- entries: seen scores, hidden scores, K_UNTIL entries, records, K_LAST scores (the 2nd, 3rd
-- and 5th empty while their index is; the 5th holds an HTTP-only user's web score), and one
-- character a user: "1" when their seen or hidden score is within SPAN and no end in K_UNTIL is
-- past, "2" when their web score is within ONLINE_WINDOW, else "0" (Python then parses no
-- score of a present connected user: a plain one's presence is that character).
local ids = {}
for uid in string.gmatch(ARGV[A], '[^\n]+') do ids[#ids + 1] = uid end
-- ids with nothing to escape (the usual case), found by one search over them all: keys without
-- a search each
local plain_ids = not string.find(ARGV[A], '[^%w%-%._~\n]')
local BASE = TAG .. ':u:'
local any_hidden = redis.call('EXISTS', K_HIDDEN) == 1
local any_until = redis.call('EXISTS', K_UNTIL) == 1
local any_last = redis.call('EXISTS', K_LAST) == 1
local any_web = redis.call('EXISTS', K_WEB) == 1
local out = {sc(NOW)}
for first = 1, #ids, 1000 do
  local chunk, keys = {}, {}
  for i = first, math.min(first + 999, #ids) do
    chunk[#chunk + 1] = ids[i]; keys[#keys + 1] = plain_ids and (BASE .. ids[i]) or ukey(ids[i])
  end
  out[#out + 1] = redis.call('ZMSCORE', K_SEEN, unpack(chunk))
  out[#out + 1] = any_hidden and redis.call('ZMSCORE', K_HIDDEN, unpack(chunk)) or {}
  out[#out + 1] = any_until and redis.call('ZMSCORE', K_UNTIL, unpack(chunk)) or {}
  out[#out + 1] = redis.call('MGET', unpack(keys))
  -- for those in neither seen nor hidden: their web score (HTTP only) or their last seen
  local seen, hidden, ends = out[#out - 3], out[#out - 2], out[#out - 1]
  local lasts, web, live = {}, {}, {}
  if any_last or any_web then
    local missing, at = {}, {}
    for i = 1, #chunk do
      lasts[i] = false
      if not seen[i] and not hidden[i] then missing[#missing + 1] = chunk[i]; at[#at + 1] = i end
    end
    if #missing > 0 then
      local w = any_web and redis.call('ZMSCORE', K_WEB, unpack(missing)) or {}
      local l = any_last and redis.call('ZMSCORE', K_LAST, unpack(missing)) or {}
      for j, i in ipairs(at) do
        if w[j] then web[i] = true; lasts[i] = w[j] else lasts[i] = l[j] or false end
      end
    end
  end
  out[#out + 1] = lasts
  for i = 1, #chunk do
    local s = num(seen[i] or hidden[i])
    if s then
      live[i] = ((num(ends[i]) or s + SPAN) >= NOW) and '1' or '0'
    elseif web[i] then
      live[i] = (num(lasts[i]) + WINDOW >= NOW) and '2' or '0'
    else
      live[i] = '0'
    end
  end
  out[#out + 1] = table.concat(live)
end
return out
