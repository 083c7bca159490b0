-- heartbeat(members...): renews a batch of leases ("user|conn") in one call; a connection's
-- rooms live as long as its lease. A heartbeat is a sign of life, not activity. Returns the
-- members that hold no lease (swept, or lost with a Redis restart), and those whose user is in
-- no index (the index was evicted under a live lease), so their owners can connect and join
-- again.
local exp = sc(NOW + LEASE_TTL)  -- formatted once, not per argument
local now = sc(NOW)
local missing = {}
local CHUNK = 1000
local any_hidden = redis.call('EXISTS', K_HIDDEN) == 1
local any_until = redis.call('EXISTS', K_UNTIL) == 1
local match = string.match

-- Users in K_UNTIL end their presence sooner than SPAN after their seen score. When the lease
-- is the longest hold (SPAN = LEASE_TTL), a renewed lease runs exactly SPAN from now, so they
-- leave K_UNTIL; with a longer ONLINE_WINDOW their end moves to the later of it and the lease.
local function renew_ends(uids)
  if SPAN == LEASE_TTL then redis.call('ZREM', K_UNTIL, unpack(uids)); return end
  local ends = redis.call('ZMSCORE', K_UNTIL, unpack(uids))
  local seen = redis.call('ZMSCORE', K_SEEN, unpack(uids))
  local hidden = any_hidden and redis.call('ZMSCORE', K_HIDDEN, unpack(uids)) or {}
  for i, uid in ipairs(uids) do
    local s = num(seen[i]) or num(hidden[i])
    if s then
      local e = math.max(num(ends[i]) or (s + SPAN), NOW + LEASE_TTL)
      set_until(uid, math.max(s, NOW), e)
    end
  end
end

-- The renewed leases of users listed in neither index, to be reported missing. Rare (an index
-- evicted under memory pressure), so looked up only when the seen scores moved fewer users
-- than were renewed: also the case for a user renewed twice in one batch, or seen at `now`.
local function unlisted(first, last, uids, lost)
  local seen = redis.call('ZMSCORE', K_SEEN, unpack(uids))
  local hidden = any_hidden and redis.call('ZMSCORE', K_HIDDEN, unpack(uids)) or {}
  local gone, any = {}, false
  for i, uid in ipairs(uids) do
    if not seen[i] and not hidden[i] then gone[uid] = true; any = true end
  end
  if not any then return end
  for i = first, last do
    local m = ARGV[i]
    if gone[match(m, '^(.*)|')] and not lost[m] then missing[#missing + 1] = m end
  end
end

for first = A, #ARGV, CHUNK do
  local last = math.min(first + CHUNK - 1, #ARGV)
  local leases, k = {}, 0
  for i = first, last do leases[k + 1] = exp; leases[k + 2] = ARGV[i]; k = k + 2 end
  -- XX: only existing leases are renewed; CH counts them. Fewer than sent means some are
  -- missing, and only then are they looked up (rare: after a restart or a sweep).
  local renewed = redis.call('ZADD', K_LEASES, 'XX', 'CH', unpack(leases))
  local users, uids, j, lost = {}, {}, 0, {}
  if renewed == last - first + 1 then
    for i = first, last do
      local uid = match(ARGV[i], '^(.*)|')
      j = j + 1; users[2 * j - 1] = now; users[2 * j] = uid; uids[j] = uid
    end
  else
    local members = {}
    for i = first, last do members[#members + 1] = ARGV[i] end
    local scores = redis.call('ZMSCORE', K_LEASES, unpack(members))
    for i, m in ipairs(members) do
      if scores[i] then
        local uid = match(m, '^(.*)|')
        j = j + 1; users[2 * j - 1] = now; users[2 * j] = uid; uids[j] = uid
      else
        missing[#missing + 1] = m; lost[m] = true
      end
    end
  end
  -- The users of the renewed leases were seen now (GT: never moved back). Ends are settled
  -- before the seen scores move (renew_ends reads them).
  if j > 0 then
    -- With SPAN > LEASE_TTL the new seen score implies an end later than the lease gives,
    -- so every renewed user needs their end recorded, K_UNTIL empty or not.
    if any_until or SPAN > LEASE_TTL then renew_ends(uids) end
    local moved = redis.call('ZADD', K_SEEN, 'XX', 'GT', 'CH', unpack(users))
    if any_hidden then
      moved = moved + redis.call('ZADD', K_HIDDEN, 'XX', 'GT', 'CH', unpack(users))
    end
    if moved < j then unlisted(first, last, uids, lost) end
  end
end
return missing
