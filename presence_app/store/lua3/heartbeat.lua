-- heartbeat(members...): a process's batch of "user|conn" heartbeats: its own lease, then one
-- write of its users' last sign of life (ZADD XX GT CH: the listed ones only). Returns the
-- members whose user is listed nowhere (swept, or lost with a Redis restart): their owners
-- connect again.
renew_proc()
local now = sc(NOW)
local missing = {}
local any_hidden = redis.call('EXISTS', K_HIDDEN) == 1
local any_until = redis.call('EXISTS', K_UNTIL) == 1
local match = string.match
for first = A, #ARGV, 1000 do
  local last = math.min(first + 999, #ARGV)
  local users, uids, j = {}, {}, 0
  for i = first, last do
    local uid = match(ARGV[i], '^(.*)|')
    j = j + 1; users[2 * j - 1] = now; users[2 * j] = uid; uids[j] = uid
  end
  -- a beating connection outlives a grace that another one's close began
  if any_until then redis.call('ZREM', K_UNTIL, unpack(uids)) end
  local moved = redis.call('ZADD', K_SEEN, 'XX', 'GT', 'CH', unpack(users))
  if any_hidden then moved = moved + redis.call('ZADD', K_HIDDEN, 'XX', 'GT', 'CH', unpack(users)) end
  if moved < j then
    -- some did not move: listed nowhere, or already seen at `now`, or twice in the batch
    local seen = redis.call('ZMSCORE', K_SEEN, unpack(uids))
    local hidden = any_hidden and redis.call('ZMSCORE', K_HIDDEN, unpack(uids)) or {}
    for i = 1, j do
      if not seen[i] and not hidden[i] then missing[#missing + 1] = ARGV[first + i - 1] end
    end
  end
end
return missing
