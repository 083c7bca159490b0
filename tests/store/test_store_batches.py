"""Batched writes: touch_many does what the same touches one by one do, in a call per shard."""

import pytest

from presence_app.store import InvalidInput

T = 1_800_000_000.0


def kinds(transitions):
    return [(t.kind, t.user_id, t.room, t.state) for t in transitions]


def script(store, now, *steps):
    """Runs steps (("touch", uid, activity) or ("connect", cid, uid)) one by one."""
    out = []
    for step in steps:
        if step[0] == "touch":
            out += store.touch(step[1], activity=step[2], now=now)
        else:
            out += store.connect(step[1], step[2], now=now)
    return out


@pytest.mark.parametrize("shards", [1, 3])
def test_touch_many_equals_the_touches_one_by_one(make_store, shards):
    one = make_store(prefix="one", shards=shards)
    many = make_store(prefix="many", shards=shards)
    for s in (one, many):
        s.connect("c", 4, now=T)  # 4 is online by socket, idle by T + 300
        s.heartbeat("c", 4, now=T + 300)
        s.idle(4, now=T + 300)  # announced by the process that saw the activity stop
        s.touch(5, activity=False, now=T)
    items = [(1, True), (2, False), (3, True), (1, False), (4, True), (5, True)]

    single = script(one, T + 310, *[("touch", u, a) for u, a in items])
    batched = many.touch_many(items, now=T + 310)

    # the same transitions (per user in the order given; shards may interleave differently)
    def by_user(ts):
        return sorted(kinds(ts), key=lambda k: k[1])

    assert by_user(batched) == by_user(single)
    assert ("update", "4", None, "online") in kinds(batched)  # back from idle
    ids = [1, 2, 3, 4, 5]
    assert many.get_many(ids, now=T + 311) == one.get_many(ids, now=T + 311)
    assert many.online(now=T + 311) == one.online(now=T + 311)
    assert many.get(2, now=T + 311 + 60).state == "offline"  # the window, as touch()


def test_touch_many_is_one_script_call_per_shard(redis_client):
    from presence_app.store import Store, StoreConfig

    store = Store(redis_client, StoreConfig(shards=4))
    items = [(i, i % 2 == 0) for i in range(200)]
    redis_client.config_resetstat()
    changes = store.touch_many(items, now=T)
    assert redis_client.info("commandstats")["cmdstat_evalsha"]["calls"] == 4
    assert sorted(int(t.user_id) for t in changes if t.kind == "online") == list(range(200))
    assert store.online_count(now=T + 1) == 200
    assert store.touch_many([], now=T) == []


def test_touch_many_refuses_a_bad_item_before_writing_anything(store):
    for bad in [("", True), (None, True), ("a\nb", False)]:
        with pytest.raises(InvalidInput):
            store.touch_many([(1, True), bad], now=T)
    assert store.online_count(now=T) == 0


async def test_touch_many_on_the_async_face(backend, request):
    import redis
    import redis.asyncio as aredis
    from django.conf import settings

    from presence_app.store import AsyncStore, StoreConfig

    client, shards = backend
    if isinstance(client, redis.RedisCluster):
        aclient = aredis.RedisCluster.from_url(request.getfixturevalue("redis_cluster").url)
    else:
        aclient = aredis.Redis.from_url(settings.REDIS_URL)
    astore = AsyncStore(aclient, StoreConfig(shards=shards))
    try:
        changes = await astore.touch_many([(1, True), (2, False)], now=T)
        assert sorted(kinds(changes)) == [
            ("online", "1", None, "online"),
            ("online", "2", None, "online"),
        ]
        assert await astore.online(now=T + 1) in (["1", "2"], ["2", "1"])
    finally:
        await astore.aclose()
