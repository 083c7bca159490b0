-- counts(limit): this shard's online users by public state: {listed, invisible,
-- looked at, online, idle, dnd}. Listed: the connected and the HTTP-only (K_SEEN's two parts); states
-- read for the `limit` most recently seen connected users, then HTTP-only ones, only.
local limit = tonumber(ARGV[A])
local listed = present_count(K_SEEN) + present_count(WEB)
local hidden = present_count(K_HIDDEN)
local users = present_list(K_SEEN, limit)
if #users < 2 * limit then
  for _, v in ipairs(present_list(WEB, limit - #users / 2)) do users[#users + 1] = v end
end
local counts = {online = 0, idle = 0, dnd = 0, offline = 0}
for i = 1, #users, 2 do
  local state = public_state(decode(record(users[i])))
  counts[state] = counts[state] + 1
end
return {listed, hidden, #users / 2, counts.online, counts.idle, counts.dnd}
