-- get_many(viewer, reveal_all, users...): each user's presence as the viewer may see it, 7 fields
-- a user: state, last_seen, last_active, message, emoji, device, meta. An invisible user is offline
-- with a frozen last seen and no status text, unless the viewer is that user or reveal_all is
-- set (superusers).
-- One ZMSCORE of the public index per 1,000 users; the hidden index only for invisible ones.
local viewer, reveal_all = ARGV[A], ARGV[A + 1] == '1'
local first = A + 2
local out, k = {}, 0
for chunk = first, #ARGV, 1000 do
  local last = math.min(chunk + 999, #ARGV)
  local ids = {}
  for i = chunk, last do ids[i - chunk + 1] = ARGV[i] end
  local listed = redis.call('ZMSCORE', K_ONLINE, unpack(ids))
  for n = 1, #ids do
    local uid = ids[n]
    local f = redis.call('HMGET', ukey(uid), 'st', 'la', 'ls', 'lv', 'msg', 'emoji', 'dev', 'mx', 'meta')
    local u = {st = f[1] or nil, la = f[2] or nil, ls = f[3] or nil, msg = f[5] or nil, emoji = f[6] or nil, mx = f[8] or nil}
    local until_
    if u.st == 'invisible' then until_ = num(redis.call('ZSCORE', K_HIDDEN, uid)) else until_ = num(listed[n]) end
    local live = until_ ~= nil and until_ >= NOW
    local state, seen, active, device = 'offline', nil, num(u.la), f[7] or ''
    if u.st == 'invisible' and not (reveal_all or uid == viewer) then
      -- Nothing that changes while they hide: no activity, device, message or emoji.
      seen, active, device = num(f[4]), nil, ''
      u.msg, u.emoji = nil, nil
    else
      if live then
        seen = NOW
        if u.st == 'invisible' then state = 'invisible' else state = public_state(u, until_) end
      else
        seen = num(u.ls)
        if until_ and seen then seen = math.max(seen, until_ - LEASE_TTL) end
      end
    end
    out[k + 1] = state; out[k + 2] = fmt(seen); out[k + 3] = fmt(active)
    out[k + 4] = live_message(u, 'msg') or ''; out[k + 5] = live_message(u, 'emoji') or ''
    out[k + 6] = device; out[k + 7] = f[9] or ''
    k = k + 7
  end
end
return out
