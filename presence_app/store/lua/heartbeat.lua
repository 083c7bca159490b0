-- heartbeat(members...): renews a batch of leases ("user|conn") in one call; a connection's
-- rooms live as long as its lease. Heartbeats are not activity. Returns the members that hold no
-- lease (swept, or lost with a Redis restart) so their owners can connect and join again.
local exp = string.format('%.17g', NOW + LEASE_TTL)  -- formatted once, not per argument
local missing = {}
local CHUNK = 1000
local any_hidden = redis.call('EXISTS', K_HIDDEN) == 1
for first = A, #ARGV, CHUNK do
  local last = math.min(first + CHUNK - 1, #ARGV)
  local leases = {}
  for i = first, last do leases[#leases + 1] = exp; leases[#leases + 1] = ARGV[i] end
  -- XX: only existing leases are renewed; CH counts them. Fewer than sent means some are
  -- missing, and only then are they looked up (rare: after a restart or a sweep).
  local renewed = redis.call('ZADD', K_LEASES, 'XX', 'CH', unpack(leases))
  local present = {}
  if renewed == last - first + 1 then
    for i = first, last do present[#present + 1] = ARGV[i] end
  else
    local members = {}
    for i = first, last do members[#members + 1] = ARGV[i] end
    local scores = redis.call('ZMSCORE', K_LEASES, unpack(members))
    for i, m in ipairs(members) do
      if scores[i] then present[#present + 1] = m else missing[#missing + 1] = m end
    end
  end
  -- The users of the renewed leases stay online as long (GT: never shortened here).
  if #present > 0 then
    local users = {}
    for _, m in ipairs(present) do users[#users + 1] = exp; users[#users + 1] = string.match(m, '^(.*)|') end
    redis.call('ZADD', K_ONLINE, 'XX', 'GT', unpack(users))
    if any_hidden then redis.call('ZADD', K_HIDDEN, 'XX', 'GT', unpack(users)) end
  end
end
return missing
