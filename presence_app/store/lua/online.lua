-- online(mode, index, window, count[, score, id]): the users of the index (0: seen, the
-- connected, 1: the invisible ones, 2: the HTTP-only, WEB: K_SEEN's negative scores, listed
-- with their web scores, lib.lua's web_list) 'list'ed most recently seen first (the index's order: score, then id,
-- both descending) with their seen scores, at most count (-1: all), or 'count'ed. With a
-- window: those whose last sign of life is within `window` seconds (the seeds' ZRANGE ...
-- BYSCORE REV LIMIT and ZCOUNT); without: those present now. With a position (score, id): the
-- list goes on after it, wherever it is now (ZCOUNT of the higher scores, then a binary search
-- of the id among the equal ones), so a page costs its own size however deep it is.
local mode, idx, window = ARGV[A], K_SEEN, tonumber(ARGV[A + 2])
if ARGV[A + 1] == '1' then idx = K_HIDDEN elseif ARGV[A + 1] == '2' then idx = WEB end
local count, after, after_id = tonumber(ARGV[A + 3]), tonumber(ARGV[A + 4]), ARGV[A + 5]
if mode == 'count' then
  if window then
    if idx == WEB then return redis.call('ZCOUNT', K_SEEN, '-inf', neg_top(NOW - window)) end
    return redis.call('ZCOUNT', idx, pos_floor(NOW - window), '+inf')
  end
  return present_count(idx)
end
if idx == WEB then  -- (no K_UNTIL end: a web user's end is their window)
  return web_list(window and NOW - window or NOW - WINDOW, count, after, after_id)
end
if not after then
  if window then
    return redis.call('ZREVRANGEBYSCORE', idx, '+inf', pos_floor(NOW - window), 'WITHSCORES', 'LIMIT', 0, count)
  end
  return present_list(idx, count)
end

-- The first rank past the position: past every higher score, and past the equal scores whose id
-- is not below the position's (ranks of equal scores hold their ids in descending order).
local rank = redis.call('ZCOUNT', idx, '(' .. sc(after), '+inf')
local hi = rank + redis.call('ZCOUNT', idx, sc(after), sc(after))
while rank < hi do
  local mid = math.floor((rank + hi) / 2)
  if below(redis.call('ZREVRANGE', idx, mid, mid)[1], after_id) then hi = mid else rank = mid + 1 end
end

local span = span_of(idx)
local floor = math.max(window and NOW - window or NOW - REACH, 0)  -- (past WEB's negatives)
local chunk = 1000
if count >= 0 then chunk = math.min(math.max(count, 16), 1000) end
local any_until = not window and redis.call('EXISTS', K_UNTIL) == 1
local out = {}
while count < 0 or #out < 2 * count do
  local page = redis.call('ZREVRANGE', idx, rank, rank + chunk - 1, 'WITHSCORES')
  local ids, ended = {}, #page < 2 * chunk
  for i = 1, #page, 2 do
    if tonumber(page[i + 1]) < floor or tonumber(page[i + 1]) <= 0 then ended = true break end
    ids[#ids + 1] = page[i]
  end
  if #ids == 0 then break end
  local ends = any_until and redis.call('ZMSCORE', K_UNTIL, unpack(ids)) or {}
  for j, uid in ipairs(ids) do
    if count >= 0 and #out >= 2 * count then break end
    local e, seen = num(ends[j]), num(page[2 * j])
    if window or (e == nil and seen + span >= NOW) or (e ~= nil and e >= NOW) then
      out[#out + 1] = uid; out[#out + 1] = page[2 * j]
    end
  end
  if ended then break end
  rank = rank + chunk
end
return out
