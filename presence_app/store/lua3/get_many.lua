-- get_many(ids): as layout 2's, plus the last seen of offline users and whether each user's
-- listing is live. ARGV[A]: the ids joined by "\n". Returns the clock, then per 1,000 users six
-- entries: seen scores, hidden scores, K_UNTIL entries, records, K_LAST scores (the 2nd, 3rd
-- and 5th empty while their index is), and one character a user, "1" when their seen or hidden
-- score is within SPAN and no end in K_UNTIL is past (Python then parses no score of a present
-- user: a plain one's presence is that character).
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
  -- the last seen of those in no index (offline): looked up for them only
  local lasts = {}
  if any_last then
    local seen, hidden, missing, at = out[#out - 3], out[#out - 2], {}, {}
    for i = 1, #chunk do
      lasts[i] = false
      if not seen[i] and not hidden[i] then missing[#missing + 1] = chunk[i]; at[#at + 1] = i end
    end
    if #missing > 0 then
      for j, s in ipairs(redis.call('ZMSCORE', K_LAST, unpack(missing))) do lasts[at[j]] = s end
    end
  end
  out[#out + 1] = lasts
  local seen, hidden, ends, live = out[#out - 4], out[#out - 3], out[#out - 2], {}
  for i = 1, #chunk do
    local sc_ = num(seen[i] or hidden[i])
    live[i] = (sc_ and (num(ends[i]) or sc_ + SPAN) >= NOW) and '1' or '0'
  end
  out[#out + 1] = table.concat(live)
end
return out
