-- upgrade_v2(users...): carries layout-2 users of this shard into layout 3 (upgrade.py). For
-- each user with a layout-2 record: their profile becomes their layout-3 record's unless they
-- have one already (written since by a new process, which adopted the profile then: load_user;
-- its explicit 'auto' is no longer needed once layout 2 goes); a user not listed in layout 3
-- gets their layout-2 last seen in K_LAST (the later of both). Returns per user: id, public last
-- seen ('' when unknown; an invisible user's is the frozen one), device. Deletes nothing:
-- upgrade.py unlinks layout 2 once the caller has saved the last seens.
local V2 = string.match(TAG, '^(.*):3$') .. ':2'
local out = {}
for i = A, #ARGV do
  local uid = ARGV[i]
  local old = v2_record(uid)
  if old then
    local o = decode(old)
    -- layout 2 lists a user by their last sign of life (seen or hidden) until the sweep
    local score = num(redis.call('ZSCORE', V2 .. ':seen', uid) or redis.call('ZSCORE', V2 .. ':hidden', uid))
    local last = math.max(num(o.ls) or 0, score or 0)
    local u = load_user(uid)
    if u.st == 'auto' then u.st = nil end
    local idx = index_of(u.st)
    local listed = redis.call('ZSCORE', idx, uid) ~= false
      or (idx == K_SEEN and redis.call('ZSCORE', K_WEB, uid) ~= false)
    if not listed and last > 0 then redis.call('ZADD', K_LAST, 'GT', sc(last), uid) end
    save_user(uid, u, listed)
    local public = last
    if o.st == 'invisible' then public = num(o.lv) or 0 end
    out[#out + 1] = uid
    if public > 0 then out[#out + 1] = sc(public) else out[#out + 1] = '' end
    out[#out + 1] = o.dev or ''
  end
end
return out
