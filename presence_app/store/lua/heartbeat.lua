-- heartbeat(members...): a process's batch of "user|conn" heartbeats: its own lease, then one
-- write of its users' last sign of life (ZADD XX GT CH: the listed ones only). Returns the
-- members whose user is listed nowhere (swept, or lost with a Redis restart), or whose grace
-- runs without their connection: their owners connect again.
renew_proc()
local now = sc(NOW)
local missing = {}
-- One index (head.lua): an HTTP-only user's negative score is below any heartbeat's, so the
-- ZADD GT below would make them connected; a connection of theirs still beating is one the
-- store had ended (a silent one swept, its process stalled past its lease) before they made a
-- request. Counting K_SEEN's negative scores before and after (two ZCOUNTs, not a lookup a
-- user) tells whether a batch did; only then are its users looked at (below).
local webs = redis.call('ZCOUNT', K_SEEN, '-inf', '(0')
local any_hidden = redis.call('EXISTS', K_HIDDEN) == 1
local any_until = redis.call('EXISTS', K_UNTIL) == 1
local any_grace = redis.call('EXISTS', K_GRACES) == 1
local match = string.match
for first = A, #ARGV, 1000 do
  local last = math.min(first + 999, #ARGV)
  local users, uids, j = {}, {}, 0
  for i = first, last do
    local uid = match(ARGV[i], '^(.*)|')
    j = j + 1; users[2 * j - 1] = now; users[2 * j] = uid; uids[j] = uid
  end
  -- A grace runs: a beating connection the user's listing holds ends the user's (K_UNTIL), and
  -- one the record holds closing (in a room: K_GRACES, also while another device of the user is
  -- open) is open again: a resumed stream whose old one closed late. (A beat sent before its own socket's close and written after it is undone
  -- by the coalescer's disconnect of its closed owner.) A connection the listing does not hold
  -- while the user's grace runs (closed without rooms; its process stalled past its lease) is
  -- missing: an owner that still has the socket connects again.
  if any_until or any_grace then
    local ends = any_until and redis.call('ZMSCORE', K_UNTIL, unpack(uids)) or {}
    local graced = any_grace and redis.call('ZMSCORE', K_GRACES, unpack(uids)) or {}
    local ending = {}
    for i = 1, j do
      if ends[i] or graced[i] then
        local uid, cid = split_member(ARGV[first + i - 1])
        local u = decode(record(uid))
        local e = live_conns(uid, u, true)[cid]
        if e == nil then
          if ends[i] then missing[#missing + 1] = ARGV[first + i - 1] end
        else
          if string.sub(e[1], 1, 1) == '~' then  -- a closing entry is the record's own table
            e[1] = PROC  -- (the other entries, dead ones too, are the sweep's to leave)
            redis.call('SADD', pkey(PROC), uid)
            save_user(uid, u, true)
            schedule_graces(uid, conns_of(u))
          end
          -- (a later end than the connection's, a long ONLINE_WINDOW's, stays)
          if ends[i] and num(ends[i]) <= NOW + SPAN then ending[#ending + 1] = uid end
        end
      end
    end
    if #ending > 0 then redis.call('ZREM', K_UNTIL, unpack(ending)) end
  end
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
if webs > 0 and redis.call('ZCOUNT', K_SEEN, '-inf', '(0') < webs then
  -- Some HTTP-only users were beaten for: a beat of theirs (now their score) whose connection the
  -- store does not hold is none of theirs to take. They are HTTP-only again, this heartbeat as
  -- their last request (their negative score was overwritten: ZADD cannot keep it), and the
  -- pair is missing, as it was before one index: its owner connects again, as a user seen by
  -- HTTP (connect.lua).
  local held = {}
  for _, m in ipairs(missing) do held[m] = true end
  for i = A, #ARGV do
    local uid, cid = split_member(ARGV[i])
    if not held[ARGV[i]] and num(redis.call('ZSCORE', K_SEEN, uid)) == NOW
        and live_conns(uid, decode(record(uid)), true)[cid] == nil then
      redis.call('ZADD', K_SEEN, sc(-NOW), uid)
      missing[#missing + 1] = ARGV[i]
      held[ARGV[i]] = true
    end
  end
end
return missing
