-- counts(limit): this shard's online users by public state. Returns {listed, invisible, looked
-- at, online, idle, dnd}: the states are read for the `limit` most recently seen visible users
-- only, so the script stays short on a big shard (the caller reports when that was not all).
local limit = tonumber(ARGV[A])
local listed = redis.call('ZCOUNT', K_ONLINE, NOW, '+inf')
local hidden = redis.call('ZCOUNT', K_HIDDEN, NOW, '+inf')
local users = redis.call('ZREVRANGEBYSCORE', K_ONLINE, '+inf', NOW, 'WITHSCORES', 'LIMIT', 0, limit)
local counts = {online = 0, idle = 0, dnd = 0, offline = 0}
for i = 1, #users, 2 do
  local f = redis.call('HMGET', ukey(users[i]), 'st', 'la')
  local state = public_state({st = f[1] or nil, la = f[2] or nil}, num(users[i + 1]))
  counts[state] = counts[state] + 1
end
return {listed, hidden, #users / 2, counts.online, counts.idle, counts.dnd}
