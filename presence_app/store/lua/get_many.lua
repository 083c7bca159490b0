-- get_many(viewer, reveal_all, users...): each user's presence as the viewer may see it, 7 fields
-- a user: state, last_seen, last_active, message, emoji, device, meta. An invisible user is offline
-- with a frozen last seen, unless the viewer is that user or reveal_all is set (superusers).
local viewer, reveal_all = ARGV[A], ARGV[A + 1] == '1'
local out = {}
for i = A + 2, #ARGV do
  local uid = ARGV[i]
  local f = redis.call('HMGET', ukey(uid), 'st', 'la', 'ls', 'lv', 'msg', 'emoji', 'dev', 'mx', 'meta')
  local u = {st = f[1] or nil, la = f[2] or nil, ls = f[3] or nil, msg = f[5] or nil, emoji = f[6] or nil, mx = f[8] or nil}
  local until_ = num(redis.call('ZSCORE', index_of(u.st), uid))
  local live = until_ ~= nil and until_ >= NOW
  local state, seen, active, device = 'offline', nil, num(u.la), f[7] or ''
  if u.st == 'invisible' and not (reveal_all or uid == viewer) then
    seen, active, device = num(f[4]), nil, ''
  else
    if live then
      seen = NOW
      if u.st == 'invisible' then state = 'invisible' else state = public_state(u, until_) end
    else
      seen = num(u.ls)
      if until_ and seen then seen = math.max(seen, until_ - LEASE_TTL) end
    end
  end
  out[#out + 1] = state; out[#out + 1] = fmt(seen); out[#out + 1] = fmt(active)
  out[#out + 1] = live_message(u, 'msg') or ''; out[#out + 1] = live_message(u, 'emoji') or ''
  out[#out + 1] = device; out[#out + 1] = f[9] or ''
end
return out
