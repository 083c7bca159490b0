-- heartbeat(members...): renews a batch of leases ("user|conn") in one call; a connection's
-- rooms live as long as its lease. Heartbeats are not activity. Returns the members that hold no
-- lease (swept, or lost with a Redis restart) so their owners can connect and join again.
local exp = string.format('%.17g', NOW + LEASE_TTL)  -- formatted once, not per argument
local missing = {}
local CHUNK = 1000
local any_hidden = redis.call('EXISTS', K_HIDDEN) == 1
local match = string.match
for first = A, #ARGV, CHUNK do
  local last = math.min(first + CHUNK - 1, #ARGV)
  local leases, k = {}, 0
  for i = first, last do leases[k + 1] = exp; leases[k + 2] = ARGV[i]; k = k + 2 end
  -- XX: only existing leases are renewed; CH counts them. Fewer than sent means some are
  -- missing, and only then are they looked up (rare: after a restart or a sweep).
  local renewed = redis.call('ZADD', K_LEASES, 'XX', 'CH', unpack(leases))
  local users, j = {}, 0
  if renewed == last - first + 1 then
    for i = first, last do users[j + 1] = exp; users[j + 2] = match(ARGV[i], '^(.*)|'); j = j + 2 end
  else
    local members = {}
    for i = first, last do members[#members + 1] = ARGV[i] end
    local scores = redis.call('ZMSCORE', K_LEASES, unpack(members))
    for i, m in ipairs(members) do
      if scores[i] then
        users[j + 1] = exp; users[j + 2] = match(m, '^(.*)|'); j = j + 2
      else
        missing[#missing + 1] = m
      end
    end
  end
  -- The users of the renewed leases stay online as long (GT: never shortened here).
  if j > 0 then
    redis.call('ZADD', K_ONLINE, 'XX', 'GT', unpack(users))
    if any_hidden then redis.call('ZADD', K_HIDDEN, 'XX', 'GT', unpack(users)) end
  end
end
return missing
