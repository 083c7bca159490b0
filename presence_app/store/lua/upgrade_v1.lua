-- upgrade_v1(users...): carries layout-1 users of this shard into layout 2 (upgrade.py). For
-- each user with a layout-1 hash: their profile (override, frozen last seen, status text,
-- device, metadata, last activity) becomes their layout-2 record's unless they have one already
-- (written since by a new process, which adopted the profile then: see load_user); their last
-- seen becomes the later of both. Returns per user: id, public last seen ('' when unknown; an
-- invisible user's is the frozen one), device. Deletes nothing: upgrade.py unlinks the hashes
-- once the caller has saved the last seens.
local V1 = string.match(TAG, '^(.*):2$')
local out = {}
for i = A, #ARGV do
  local uid = ARGV[i]
  local flat = redis.call('HGETALL', V1 .. ':u:' .. esc(uid))
  if #flat > 0 then
    local old = {}
    for j = 1, #flat, 2 do old[flat[j]] = flat[j + 1] end
    -- layout 1 kept the end of a listed user's presence; their last renewal was LEASE_TTL before
    local ends = num(redis.call('ZSCORE', V1 .. ':online', uid) or redis.call('ZSCORE', V1 .. ':hidden', uid))
    local last = math.max(num(old.ls) or 0, (ends or 0) - LEASE_TTL)
    local uk = ukey(uid)
    local raw = redis.call('GET', uk)
    local u = decode(raw)
    if not raw then
      for _, name in ipairs(V1_FIELDS) do u[name] = old[name] end
    end
    if last > (num(u.ls) or 0) then u.ls = sc(last) end
    local listed = redis.call('ZSCORE', index_of(u.st), uid) ~= false
    save_user(uk, u, listed)
    local public = last
    if old.st == 'invisible' then public = num(old.lv) or 0 end
    out[#out + 1] = uid
    if public > 0 then out[#out + 1] = sc(public) else out[#out + 1] = '' end
    out[#out + 1] = old.dev or ''
  end
end
return out
