-- online(mode, index, window, count): the users of the index (0: seen, 1: the invisible ones, 2: web)
-- 'list'ed most recently seen first with their seen scores, at most count (-1: all), or
-- 'count'ed. With a window: those whose last sign of life is within `window` seconds (the
-- seeds' ZRANGE ... BYSCORE REV LIMIT and ZCOUNT); without: those present now.
local mode, idx, window = ARGV[A], K_SEEN, tonumber(ARGV[A + 2])
if ARGV[A + 1] == '1' then idx = K_HIDDEN elseif ARGV[A + 1] == '2' then idx = K_WEB end
if window then
  local since = sc(NOW - window)
  if mode == 'count' then return redis.call('ZCOUNT', idx, since, '+inf') end
  return redis.call('ZREVRANGEBYSCORE', idx, '+inf', since, 'WITHSCORES', 'LIMIT', 0, ARGV[A + 3])
end
if mode == 'count' then return present_count(idx) end
return present_list(idx, tonumber(ARGV[A + 3]))
