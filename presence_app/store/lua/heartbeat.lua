-- heartbeat(members...): renews a batch of leases ("user|conn") in one call; a connection's
-- rooms live as long as its lease. Heartbeats are not activity. Returns the members that hold no
-- lease (swept, or lost with a Redis restart) so their owners can connect and join again.
local exp = NOW + LEASE_TTL
local missing = {}
local CHUNK = 1000
for first = A, #ARGV, CHUNK do
  local last = math.min(first + CHUNK - 1, #ARGV)
  local members = {}
  for i = first, last do members[#members + 1] = ARGV[i] end
  local scores = redis.call('ZMSCORE', K_LEASES, unpack(members))
  local leases, users = {}, {}
  for i, m in ipairs(members) do
    if scores[i] then
      leases[#leases + 1] = exp; leases[#leases + 1] = m
      users[#users + 1] = exp; users[#users + 1] = (split_member(m))
    else
      missing[#missing + 1] = m
    end
  end
  if #leases > 0 then
    redis.call('ZADD', K_LEASES, 'XX', unpack(leases))
    redis.call('ZADD', K_ONLINE, 'XX', 'GT', unpack(users))
    redis.call('ZADD', K_HIDDEN, 'XX', 'GT', unpack(users))
  end
end
return missing
