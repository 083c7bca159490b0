-- The store's key layout (docs/store-layout.md).
-- The head of every script (prepended by scripts.py; lib.lua follows it in every script
-- but the reads that need only the keys and the clock).
-- KEYS: the shard's seen, hidden, until, procs and last indexes. ARGV[1]: the shard's key base
-- ('{prefix:shard}:3'); ARGV[2]: now ('' = the server clock); ARGV[3..7]: LEASE_TTL,
-- DISCONNECT_GRACE, ONLINE_WINDOW, IDLE_AFTER, METADATA_TTL; ARGV[8]: REGISTRY_BUCKETS;
-- ARGV[9]: the calling process; ARGV[10..]: the script's own.
--
-- K_SEEN scores each connected visible user by their last sign of life (and each HTTP-only one
-- by their last request, negated: WEB below); invisible ones sit in K_HIDDEN. Every heartbeat
-- batch of a process renews its users' scores, so a connected user's presence runs LEASE_TTL
-- after their score (SPAN) unless K_UNTIL records another end: a sooner one (a closed last
-- connection's grace) or, with ONLINE_WINDOW > LEASE_TTL, a later one (a request's window,
-- which a heartbeat does not end: REACH is how far back a score may be and the user still
-- present). K_PROCS: process -> lease expiry, renewed by its heartbeats (the coalescer's
-- batches, an empty one at least every LEASE_TTL / 3 while the process holds a connection: its
-- keepalive), connects, disconnects and sweeps; not by its other writes. The
-- registry (TAG:c:<bucket>, small hashes) holds a plain user's one connection as
-- "process\31conn\31last activity"; a user with more connections, or rooms, keeps them in their
-- record (conns: {conn: [process, room, ...]}) and is in TAG:p:<process> for each. K_LAST: offline
-- users by last seen. A registry field or record connection counts only while its process's
-- lease runs and its user is listed: a dead process's entries are inert until removed.
local K_SEEN, K_HIDDEN, K_UNTIL, K_PROCS, K_LAST = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local TAG = ARGV[1]
local NOW = tonumber(ARGV[2])
if not NOW then
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local LEASE_TTL, GRACE, WINDOW = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local IDLE_AFTER, META_TTL = tonumber(ARGV[6]), ARGV[7]
local BUCKETS, PROC = tonumber(ARGV[8]), ARGV[9]
local SPAN = LEASE_TTL
local REACH = math.max(SPAN, WINDOW)
local A = 10  -- index of the first script argument
local function sc(x) return string.format('%.17g', x) end
-- The records: fields of one hash a shard (K_RECS), so that a read of many users names no key
-- per user; K_REXP: the expiry of an unlisted user's record (lib.lua).
local K_RECS, K_REXP = TAG .. ':recs', TAG .. ':rexp'
-- One index (issue 43): a visible user with no connection (HTTP only) is in K_SEEN too, by
-- their last request negated (-w: the sign tells the kind; negation is exact for doubles), so
-- that a read finds every kind of user in one lookup. Their presence runs ONLINE_WINDOW after
-- w. WEB names that part of K_SEEN where a script asks for an index (index_of's kin, the
-- listings, the sweep); it is no key: the negative scores are K_SEEN's, below 0 (a score
-- range of the connected starts past 0, one of the HTTP-only ends before it).
local WEB = '<web>'
-- A K_SEEN score (a number, or nil) as the user's listing: K_SEEN and the score when positive
-- (connected), WEB and the web score when negative (HTTP only), nil when absent.
local function listing_of(s)
  if s == nil then return nil, nil end
  if s > 0 then return K_SEEN, s end
  return WEB, -s
end
-- The lower end of a range of connected scores (K_SEEN, K_HIDDEN) from `floor`: never below 0,
-- past the HTTP-only users' negative scores.
local function pos_floor(floor)
  if floor > 0 then return sc(floor) end
  return '(0'
end
-- The upper end of a range of HTTP-only users' negative scores for web scores >= `floor`.
local function neg_top(floor)
  if floor > 0 then return sc(-floor) end
  return '(0'
end
-- Records first: the record of a user in K_SEEN ends with a copy of their K_SEEN score, so that
-- a read of a record holder whose copy is fresh (copy + SPAN >= NOW) needs no K_SEEN lookup: a
-- copy is never later than the score (scores only grow while a user is in K_SEEN, and a user
-- leaves K_SEEN with their copy), so a fresh copy means a score within the lease. A copy is
-- COPY_WIDTH characters, the score a microsecond down, so that it is never rounded up past it.
-- K_COPIES: the users whose record carries a copy, by when the sweep renews it (HALF a lease
-- after the score it copies: still fresh for that long after), from their K_SEEN score at
-- the time; the heartbeat writes only K_SEEN.
local K_COPIES = TAG .. ':copies'
local COPY_WIDTH = 20
local HALF = SPAN / 2
local function copy_of(s) return string.format('%020.6f', s - 0.000001) end
-- When a copy of `s` is due for renewal; a score that no longer moves (its user's beats stopped)
-- is looked at again HALF a lease from now, not at every sweep.
local function copy_due(s)
  if s + HALF > NOW then return s + HALF end
  return NOW + HALF
end
-- A record's copy (a number), nil when it carries none: its end is then its last separator.
local function copy_in(r)
  if string.byte(r, -1) == 31 or string.byte(r, -COPY_WIDTH - 1) ~= 31 then return nil end
  return tonumber(string.sub(r, -COPY_WIDTH))
end
