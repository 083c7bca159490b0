-- read_many(ids, buckets): the read of get_many.lua (whose head describes its reply), as a
-- function, so that a write can answer with its user's state after it in the same script call
-- (set_status.lua): a second call, in the same round trip or after it, could run before the
-- write on a Redis Cluster client, which sends a round trip's calls at once, in no order.
-- ids: at most 1,000; buckets: their registry buckets (keys.registry_bucket), or nil.
local function read_many(ids, buckets)
-- Records first: the page's records, and a holder whose copy is fresh is connected and within
-- their lease (head.lua), unless K_UNTIL holds an end of theirs; only the ids with no fresh
-- copy (most of a page: plain users have no record) are looked up in K_SEEN, the one index: a
-- positive score is a connected user's, a negative one an HTTP-only user's web score (WEB);
-- only the ids with neither are looked up in K_HIDDEN (while it holds anyone) and K_LAST.
local records = redis.call('HMGET', K_RECS, unpack(ids))
local fresh, nf = {}, 0
local floor, byte, sub, w = NOW - SPAN, string.byte, string.sub, -COPY_WIDTH
for i = 1, #ids do
  local r = records[i]
  if r and byte(r, -1) ~= 31 and byte(r, w - 1) == 31 then  -- head.lua's copy_in, inline
    local c = tonumber(sub(r, w))
    if c and c >= floor then fresh[i] = c; nf = nf + 1 end  -- (the copy: a true value)
  end
end
-- The seen scores as RESP3 doubles: Lua gets each as a number ({double = x}; nil where none),
-- not as a string it interns and collects (a page of present users: 3-8 % less of its time;
-- socket pages 0.89x of the read with RESP2 strings, side by side on the 1,000,000-user site).
-- An HTTP-only user's web score (a negative one) goes into the reply scaled: web_scores below.
-- A page with few fresh copies (a mixed page: one in ten) is looked up whole, as if none were:
-- a lookup in K_SEEN costs less than picking the others out and spreading their scores back.
local seen = {}
if nf * 2 < #ids then
  if nf > 0 then fresh, nf = {}, 0 end
  redis.setresp(3)
  seen = redis.call('ZMSCORE', K_SEEN, unpack(ids))
  redis.setresp(2)
elseif nf < #ids then
  local rest, nr = {}, 0
  for i = 1, #ids do
    if not fresh[i] then nr = nr + 1; rest[nr] = ids[i] end
  end
  redis.setresp(3)
  local got = redis.call('ZMSCORE', K_SEEN, unpack(rest))
  redis.setresp(2)
  local j = 0
  for i = 1, #ids do  -- (false, not nil, where none: one array, no holes)
    if fresh[i] then seen[i] = false else j = j + 1; seen[i] = got[j] or false end
  end
end
-- (a negative score: HTTP only; `web` holds it, made positive, and `seen` holds the others)
local missing, web, nw = {}, {}, 0  -- the ids with neither a fresh copy nor a score in K_SEEN
for i = 1, #ids do
  local s = seen[i]
  if s then
    if s.double < 0 then web[i] = -s.double; seen[i] = false; nw = nw + 1 end
  elseif not fresh[i] then
    missing[#missing + 1] = ids[i]
  end
end
local function scores(key, which)
  if #which == 0 or redis.call('EXISTS', key) == 0 then return {} end
  return redis.call('ZMSCORE', key, unpack(which))
end
local hidden = scores(K_HIDDEN, missing)
-- K_UNTIL's ends, of the connected (a fresh copy, seen or hidden) only: nobody else has one,
-- and a site's K_UNTIL is seldom empty (a closed connection's grace), so a page of HTTP-only
-- users would pay a ZMSCORE of them all
local ends = {}
if redis.call('EXISTS', K_UNTIL) == 1 then
  local connected, at, m = ids, nil, 0
  if #missing > 0 or nw > 0 then
    connected, at = {}, {}
    for i = 1, #ids do
      local c = fresh[i] or seen[i]
      if not (c or web[i]) then
        m = m + 1
        c = hidden[m]
      end
      if c then
        connected[#connected + 1] = ids[i]
        at[#connected] = i
      end
    end
  end
  if #connected > 0 then
    for j, e in ipairs(redis.call('ZMSCORE', K_UNTIL, unpack(connected))) do
      ends[at and at[j] or j] = e
    end
  end
end
local codes, seen2, ends2, records2, webs3 = {}, {}, {}, {}, {}
local hidden2, web2, last2, unknown, at = {}, {}, {}, {}, {}
local has_ends, k, n, m = next(ends) ~= nil, 0, 0, 0
-- fresh copies with an end: their seen score is sent, read below
local late, late_at, late_copy = {}, {}, {}
for i = 1, #ids do
  local s, r, f = seen[i], records[i], fresh[i]
  if f or s then
    if not (has_ends and ends[i]) and (f or s.double + SPAN >= NOW) then  -- within their lease
      if r then
        codes[i], n = '2', n + 1
        records2[n] = r
      else
        codes[i] = '1'
      end
    else
      codes[i], n, k = '0', n + 1, k + 1
      records2[n] = r or ''
      if s then seen2[k] = sc(s.double)
      else
        seen2[k] = false
        late[#late + 1] = ids[i]
        late_at[#late], late_copy[#late] = k, f
      end
      if has_ends then ends2[k] = ends[i] or false end
    end
  else
    local h, w = false, web[i]
    if not w then m = m + 1; h, w = hidden[m] or false, false end
    if not (h or r) and w and web[i] + WINDOW >= NOW then  -- HTTP only, within their window
      codes[i] = '3'
      webs3[#webs3 + 1] = web[i]
    else
      codes[i], n, k = '0', n + 1, k + 1
      records2[n], seen2[k] = r or '', false
      if has_ends then ends2[k] = ends[i] or false end
      local j = #hidden2 + 1
      hidden2[j], web2[j], last2[j] = h, w and sc(w), false
      if not (h or w) then  -- their last seen, if the sweep wrote one
        unknown[#unknown + 1] = ids[i]
        at[#unknown] = j
      end
    end
  end
end
for j, v in ipairs(scores(K_LAST, unknown)) do last2[at[j]] = v end
if #late > 0 then  -- (a fresh copy's user is in K_SEEN: a copy leaves with its score)
  redis.setresp(3)
  local got = redis.call('ZMSCORE', K_SEEN, unpack(late))
  redis.setresp(2)
  -- (K_SEEN lost under them, an eviction: the copy, never later than the score it was, rather
  -- than a script error for the whole page)
  for j = 1, #late do
    local g = got[j] and got[j].double
    seen2[late_at[j]] = sc(g and g > 0 and g or late_copy[j])
  end
end
-- The web scores of the "3"s: a score times 2^22 is a whole number from 2^30 s (2004) on, exact
-- (a double's step there is 2^-22 or more), which goes into the reply as an integer (Redis
-- writes a Lua number so) where a string.format a score, even '%d', costs Lua ~0.1-0.3 us: an
-- array of those when every one is whole (derive.WEB_SCALE), else one text of each as '%.17g'.
local function web_scores(ws)
  local out = {}
  for j = 1, #ws do
    local y = ws[j] * 4194304
    if y % 1 ~= 0 or y >= 9.2e18 then out = nil; break end
    out[j] = y
  end
  if out then return out end
  out = {}
  for j = 1, #ws do out[j] = sc(ws[j]) end
  return table.concat(out, ' ')
end
local out = {sc(NOW), table.concat(codes), table.concat(records2, '\30'),
  #webs3 > 0 and web_scores(webs3) or '', seen2, ends2, hidden2, web2, last2}
if buckets then  -- the registry fields of the connected (a fresh copy, seen or hidden) only
  local fields, mm = {}, 0
  for i = 1, #ids do
    local connected = fresh[i] or seen[i]
    if not (connected or web[i]) then
      mm = mm + 1
      connected = hidden[mm]
    end
    fields[i] = connected and redis.call('HGET', TAG .. ':c:' .. buckets[i], ids[i]) or false
  end
  out[10] = fields
end
return out
end
