-- counts(limit): this shard's online users by public state, as layout 2's: {listed, invisible,
-- looked at, online, idle, dnd}; states read for the `limit` most recently seen users only.
local limit = tonumber(ARGV[A])
local listed, hidden = present_count(K_SEEN), present_count(K_HIDDEN)
local users = present_list(K_SEEN, limit)
local counts = {online = 0, idle = 0, dnd = 0, offline = 0}
for i = 1, #users, 2 do
  local state = public_state(decode(record(users[i])))
  counts[state] = counts[state] + 1
end
return {listed, hidden, #users / 2, counts.online, counts.idle, counts.dnd}
