"""The store against a real redis-server: every promise of docs/guarantees.md the store keeps.

Time is injected with ``now`` (the defaults: lease 90 s, grace 20 s, window 60 s, idle 300 s).
"""

import pytest

from presence_app.store import InvalidInput, UnknownConnection

from ..conftest import all_keys

T = 1_800_000_000.0


def kinds(transitions):
    return [(t.kind, t.user_id, t.room, t.state) for t in transitions]


# -- connection and user online ---------------------------------------------------------------
def test_connect_takes_a_lease_and_the_user_is_online(store):
    assert kinds(store.connect("c1", 7, now=T)) == [("online", "7", None, "online")]
    p = store.get(7, now=T + 1)
    assert p.state == "online" and p.is_online
    assert p.last_active == T
    assert store.online(now=T + 1) == ["7"]
    assert store.online_count(now=T + 1) == 1


def test_lease_expires_without_heartbeats_and_heartbeats_renew_it(store):
    store.connect("c1", 7, now=T)
    assert store.get(7, now=T + 89).state == "online"
    assert store.get(7, now=T + 91).state == "offline"
    assert store.heartbeat("c1", 7, now=T + 60) is True
    assert store.get(7, now=T + 149).state == "online"
    assert store.get(7, now=T + 151).state == "offline"


def test_heartbeat_of_an_unknown_connection_reports_it_missing(store):
    assert store.heartbeat("nope", 7, now=T) is False
    store.connect("c1", 7, now=T)
    assert store.heartbeat_many([("c1", 7), ("c2", 8)], now=T + 1) == [("c2", "8")]
    assert store.get(8, now=T + 1).state == "offline"


def test_heartbeat_reports_a_user_whose_index_was_evicted_under_a_live_lease(store):
    # Redis evicts whole keys (an eviction policy at maxmemory): the leases may survive the
    # index that lists their users. Such a lease is reported missing, so that its socket
    # connects again and lists its user again.
    store.connect("a", 1, now=T)
    store.connect("b1", 2, now=T)
    store.connect("b2", 2, now=T)
    store.connect("h", 3, now=T)
    store.set_status(3, "invisible", now=T)
    pairs = [("a", 1), ("b1", 2), ("b2", 2), ("h", 3)]
    # A listed user renewed twice in one batch is not reported (the lookup runs, finds them).
    assert store.heartbeat_many(pairs, now=T + 10) == []
    tag = store.keys.tag_for_user
    store.client.delete(store.keys.seen(tag("1")))
    store.client.delete(store.keys.hidden(tag("3")))
    missing = store.heartbeat_many(pairs, now=T + 30)
    evicted_with_1 = [("b1", "2"), ("b2", "2")] if tag("2") == tag("1") else []
    assert sorted(missing) == sorted([("a", "1"), ("h", "3"), *evicted_with_1])
    for conn, uid in missing:
        store.connect(conn, uid, now=T + 31)  # what the socket does with a missing lease
    assert set(store.online(now=T + 31)) == {"1", "2"}
    assert store.get(3, viewer=3, now=T + 31).state == "invisible"  # back in its own index
    assert store.heartbeat_many(pairs, now=T + 60) == []


def test_http_touch_is_online_for_the_window(store):
    assert kinds(store.touch(5, now=T)) == [("online", "5", None, "online")]
    assert store.touch(5, now=T + 10) == []
    assert store.get(5, now=T + 69).state == "online"
    assert store.get(5, now=T + 71).state == "offline"
    assert store.online_count(now=T + 71) == 0
    assert kinds(store.sweep(now=T + 71)) == [("offline", "5", None, "offline")]
    assert store.get(5, now=T + 100).last_seen == T + 10


def test_user_ids_are_strings_ints_are_converted(store):
    store.connect("c1", 42, now=T)
    assert store.get("42", now=T).state == "online"
    assert list(store.get_many([42, "42"], now=T)) == ["42"]


# -- multi-device roll-up ---------------------------------------------------------------------
def test_user_is_online_while_any_connection_lives(store):
    store.connect("laptop", 1, now=T)
    assert store.connect("phone", 1, now=T + 30) == []  # already online: no second event
    store.heartbeat("phone", 1, now=T + 60)
    # the laptop's lease ran out at T+90; the phone's runs to T+150
    assert store.get(1, now=T + 100).state == "online"
    assert store.sweep(now=T + 100) == []  # the laptop is evicted silently: the user stays
    assert store.get(1, now=T + 149).state == "online"
    assert kinds(store.sweep(now=T + 151)) == [("offline", "1", None, "offline")]


def test_closing_one_of_two_connections_changes_nothing(store):
    store.connect("a", 1, now=T)
    store.connect("b", 1, now=T)
    store.join("room", "a", 1, now=T)
    store.join("room", "b", 1, now=T)
    assert store.disconnect("a", 1, now=T + 5) == []
    assert store.sweep(now=T + 30) == []  # a's grace is over; b keeps the user and the room
    assert store.room_members("room", now=T + 30) == ["1"]
    assert store.get(1, now=T + 30).state == "online"


# -- idle -------------------------------------------------------------------------------------
# -- dnd and invisible ------------------------------------------------------------------------
def test_dnd_overrides_online_and_idle_while_online(store):
    store.connect("c", 1, now=T)
    assert kinds(store.set_status(1, "dnd", now=T + 1)) == [("update", "1", None, "dnd")]
    assert store.get(1, now=T + 2).state == "dnd"
    store.heartbeat("c", 1, now=T + 60)
    store.heartbeat("c", 1, now=T + 120)
    assert store.get(1, now=T + 150).state == "dnd"
    assert store.get(1, now=T + 500).state == "offline"
    assert kinds(store.set_status(1, "auto", now=T + 3)) == [("update", "1", None, "online")]


def test_status_change_while_offline_emits_nothing(store):
    assert store.set_status(1, "dnd", message="away", now=T) == []
    assert store.get(1, now=T).state == "offline"
    assert store.get(1, now=T).message == "away"


def test_invisible_never_shows_except_to_the_user(store):
    store.connect("c", 1, now=T)
    store.join("lobby", "c", 1, now=T)
    store.connect("d", 2, now=T)
    store.join("lobby", "d", 2, now=T)
    changes = kinds(store.set_status(1, "invisible", now=T + 10))
    assert changes == [("leave", "1", "lobby", "offline"), ("offline", "1", None, "offline")]
    now = T + 20
    assert store.get(1, now=now).state == "offline"
    assert store.get(1, now=now).last_seen == T + 10  # frozen when they vanished
    assert store.get(1, now=now).last_active is None
    assert store.get_many([1, 2], now=now)["1"].state == "offline"
    assert store.online(now=now) == ["2"]
    assert store.online_count(now=now) == 1
    assert store.room_members("lobby", now=now) == ["2"]
    assert store.room_count("lobby", now=now) == 1
    assert store.rooms() == [("lobby", 1)]
    # ... but the user sees themself, and a superuser view may reveal them
    assert store.get(1, viewer=1, now=now).state == "invisible"
    assert store.get(1, viewer=2, now=now).state == "offline"
    assert store.get(1, reveal_all=True, now=now).state == "invisible"
    assert set(store.online(now=now, include_invisible=True)) == {"1", "2"}
    # heartbeats, joins and activity of an invisible user stay silent
    store.heartbeat("c", 1, now=T + 30)
    assert store.touch(1, now=T + 31) == []
    store.join("other", "c", 1, now=T + 32)
    assert store.room_members("other", now=T + 33) == []
    assert store.get(1, now=T + 33).last_seen == T + 10
    # coming back announces online and the rooms again
    back = kinds(store.set_status(1, "auto", now=T + 40))
    assert back == [
        ("online", "1", None, "online"),
        ("join", "1", "lobby", "online"),
        ("join", "1", "other", "online"),
    ]
    assert store.room_members("lobby", now=T + 41) == ["2", "1"]


def test_invisible_user_expiring_is_swept_silently(store):
    store.connect("c", 1, now=T)
    store.join("lobby", "c", 1, now=T)
    store.set_status(1, "invisible", now=T + 1)
    assert store.sweep(now=T + 200) == []
    assert store.get(1, viewer=1, now=T + 200).state == "offline"
    # coming back visible while offline announces nothing
    assert store.set_status(1, "auto", now=T + 201) == []


# -- metadata ---------------------------------------------------------------------------------
def test_message_emoji_device_and_free_fields(store):
    store.connect("c", 1, now=T, device="mobile")
    changes = store.set_status(1, message="In a meeting", emoji="📅", now=T + 1, team="core")
    assert kinds(changes) == [("update", "1", None, "online")]
    assert (changes[0].message, changes[0].emoji) == ("In a meeting", "📅")
    p = store.get(1, now=T + 2)
    assert (p.message, p.emoji, p.device, p.meta) == (
        "In a meeting",
        "📅",
        "mobile",
        {"team": "core"},
    )
    assert store.set_status(1, message="In a meeting", now=T + 3) == []  # no change, no event
    store.set_status(1, message="", now=T + 4)
    assert store.get(1, now=T + 5).message == ""
    assert store.get(1, now=T + 5).emoji == "📅"


def test_status_message_expires(store):
    store.set_status(1, message="Lunch", emoji="🥪", expires_in=3600, now=T)
    assert store.get(1, now=T + 3599).message == "Lunch"
    p = store.get(1, now=T + 3601)
    assert (p.message, p.emoji) == ("", "")


def test_metadata_is_bounded(store):
    with pytest.raises(InvalidInput):
        store.set_status(1, message="x" * 141)
    with pytest.raises(InvalidInput):
        store.set_status(1, blob="x" * 3000)
    with pytest.raises(InvalidInput):
        store.set_status(1, state="away")
    with pytest.raises(InvalidInput):
        store.set_status(1, message="line\nbreak")


# -- rooms ------------------------------------------------------------------------------------
def test_rooms_join_leave_on_first_in_and_last_out(store):
    store.connect("a1", 1, now=T)
    store.connect("a2", 1, now=T)
    store.connect("b1", 2, now=T)
    assert kinds(store.join("r", "a1", 1, now=T + 1)) == [("join", "1", "r", "online")]
    assert store.join("r", "a2", 1, now=T + 2) == []
    assert store.join("r", "a2", 1, now=T + 2) == []  # idempotent
    assert kinds(store.join("r", "b1", 2, now=T + 3)) == [("join", "2", "r", "online")]
    assert store.room_members("r", now=T + 4) == ["1", "2"]
    assert store.room_count("r", now=T + 4) == 2
    assert store.leave("r", "a1", 1, now=T + 5) == []
    assert kinds(store.leave("r", "a2", 1, now=T + 6)) == [("leave", "1", "r", "online")]
    assert store.leave("r", "a2", 1, now=T + 6) == []
    assert store.room_members("r", now=T + 7) == ["2"]
    assert store.user_rooms(2) == ["r"]


def test_a_user_may_be_in_many_rooms(store):
    store.connect("c", 1, now=T)
    for room in ("a", "b", "c"):
        store.join(room, "c", 1, now=T)
    assert store.user_rooms(1) == ["a", "b", "c"]
    assert sorted(store.rooms()) == [("a", 1), ("b", 1), ("c", 1)]


def test_join_needs_a_connection(store):
    with pytest.raises(UnknownConnection):
        store.join("r", "ghost", 1, now=T)


def test_room_names_with_key_syntax_stay_data(store):
    store.connect("c", 1, now=T)
    odd = ["{presence:0}:online", "a*b", "with space", "ünïcode:😀", "%41"]
    for room in odd:
        store.join(room, "c", 1, now=T)
    for room in odd:
        assert store.room_members(room, now=T) == ["1"]
        # Lua's esc() and Python's keys.esc() agree: the key the script wrote is the one we name
        tag = store.keys.tag_for_user("1")
        assert store.client.exists(store.keys.room(tag, room)) == 1
    assert store.online(now=T) == ["1"]
    for key in all_keys(store.client):
        assert all(ch not in key.split("}", 1)[1] for ch in "{}*\n ")
    # a name, not text: control characters are refused (the scripts' replies split on two)
    for room in ("line\nbreak", "a\x1eb", "a\x1fb"):
        with pytest.raises(InvalidInput, match="control characters"):
            store.join(room, "c", 1, now=T)


def test_expired_connection_leaves_its_rooms_with_events(store):
    store.connect("a", 1, now=T)
    store.connect("b", 2, now=T)
    store.join("r", "a", 1, now=T)
    store.join("r", "b", 2, now=T)
    store.heartbeat("b", 2, now=T + 80)
    changes = kinds(store.sweep(now=T + 95))  # a's process died: no heartbeat since T
    assert changes == [("leave", "1", "r", "offline"), ("offline", "1", None, "offline")]
    assert store.room_members("r", now=T + 95) == ["2"]
    # the last seen is the last time the dead connection was renewed
    assert store.get(1, now=T + 95).last_seen == T


def test_room_members_hide_users_gone_before_the_sweep(store):
    store.connect("a", 1, now=T)
    store.join("r", "a", 1, now=T)
    assert store.room_members("r", now=T + 100) == []


# -- grace ------------------------------------------------------------------------------------
def test_clean_disconnect_keeps_the_user_for_the_grace(store):
    store.connect("a", 1, now=T)
    store.join("r", "a", 1, now=T)
    assert store.disconnect("a", 1, now=T + 10) == []
    assert store.get(1, now=T + 29).state == "online"
    assert store.sweep(now=T + 29) == []
    assert store.get(1, now=T + 31).state == "offline"
    changes = kinds(store.sweep(now=T + 31))
    assert changes == [("leave", "1", "r", "offline"), ("offline", "1", None, "offline")]
    assert store.get(1, now=T + 40).last_seen == T + 10


def test_reconnect_within_the_grace_emits_no_leave_or_join(store):
    store.connect("old", 1, now=T)
    store.join("r", "old", 1, now=T)
    store.disconnect("old", 1, now=T + 10)
    assert store.connect("new", 1, now=T + 12) == []
    assert store.join("r", "new", 1, now=T + 12) == []
    assert store.sweep(now=T + 31) == []  # old's grace ended: the user and room stay
    assert store.room_members("r", now=T + 31) == ["1"]
    assert store.get(1, now=T + 31).state == "online"


def test_disconnect_of_unknown_connection_is_harmless(store):
    assert store.disconnect("nope", 1, now=T) == []


def test_http_window_outlasts_a_short_grace(store):
    store.touch(1, now=T)
    store.connect("a", 1, now=T + 1)
    store.disconnect("a", 1, now=T + 2)
    assert store.get(1, now=T + 50).state == "online"  # the HTTP window runs to T+60
    assert store.get(1, now=T + 61).state == "offline"


# -- sweep ------------------------------------------------------------------------------------
def test_sweep_returns_each_transition_once_and_in_batches(make_store):
    store = make_store(sweep_batch=7)
    for i in range(30):
        store.connect(f"c{i}", i, now=T)
        store.join("r", f"c{i}", i, now=T)
    changes = store.sweep(now=T + 100)
    assert sorted(t.user_id for t in changes if t.kind == "leave") == sorted(
        str(i) for i in range(30)
    )
    assert sorted(t.user_id for t in changes if t.kind == "offline") == sorted(
        str(i) for i in range(30)
    )
    assert store.sweep(now=T + 100) == []
    assert store.online_count(now=T + 100) == 0
    assert store.rooms() == []


# -- paging and counts ------------------------------------------------------------------------
def test_online_is_most_recent_first_with_paging(store):
    for i in range(10):
        store.touch(i, now=T + i)
    assert store.online(now=T + 10) == [str(i) for i in range(9, -1, -1)]
    assert store.online(offset=2, limit=3, now=T + 10) == ["7", "6", "5"]
    assert store.online(offset=9, limit=5, now=T + 10) == ["0"]
    assert store.online(offset=20, limit=5, now=T + 10) == []
    assert store.online_count(now=T + 10) == 10
    assert store.online_count(now=T + 62) == 8  # 0 and 1 ran out of their window


def test_online_window_is_the_last_sign_of_life(store):
    # The seeds' "who was seen in the last N seconds": heartbeat, activity and touch count.
    now = T + 200
    for uid in ("hb59", "hb61", "act59", "act61"):
        store.connect(f"c-{uid}", uid, now=T)
    store.heartbeat("c-hb59", "hb59", now=now - 58)
    store.heartbeat("c-hb61", "hb61", now=now - 61)
    for uid in ("act59", "act61"):
        store.heartbeat(f"c-{uid}", uid, now=now - 80)
    store.activity("act59", now=now - 59)
    store.activity("act61", now=now - 61)
    store.touch("http59", now=now - 59.5)
    store.touch("http61", now=now - 61)
    assert store.online(window=60, now=now) == ["hb59", "act59", "http59"]
    assert store.online_count(window=60, now=now) == 3
    # present now: every lease holds (renewed at now - 80 or later); http61's window has ended
    assert set(store.online(now=now)) == {"hb59", "hb61", "act59", "act61", "http59"}
    assert store.online_count(now=now) == 5
    assert store.online(window=60, now=now + 2.5) == []  # the seconds go by
    assert store.online_count(window=62, now=now) == 6


def test_online_window_pages_most_recent_first_and_counts_agree(store):
    for i in range(10):
        store.touch(i, now=T + i)
    now = T + 10
    assert store.online(window=5, now=now) == ["9", "8", "7", "6", "5"]
    assert store.online(window=5, offset=1, limit=2, now=now) == ["8", "7"]
    assert store.online(window=5, offset=4, limit=3, now=now) == ["5"]
    for window in (0.5, 1, 4.5, 5, 9, 100):
        assert store.online_count(window=window, now=now) == len(
            store.online(window=window, now=now)
        )
    with pytest.raises(InvalidInput):
        store.online(window=-1, now=now)


def test_online_window_lists_gone_users_until_they_are_swept(store):
    store.touch(1, now=T)
    assert store.online(now=T + 70) == []  # the HTTP window ended at T + 60
    assert store.online(window=80, now=T + 70) == ["1"]  # seen 70 s ago, not swept yet
    store.sweep(now=T + 70)
    assert store.online(window=80, now=T + 70) == []
    assert store.online_count(window=80, now=T + 70) == 0


@pytest.mark.parametrize("shards", [1, 4])
def test_get_many_is_one_round_trip_for_any_number_of_ids(redis_client, shards):
    from presence_app.store import Store, StoreConfig

    store = Store(redis_client, StoreConfig(shards=shards))
    for i in range(0, 500, 2):
        store.touch(i, now=T)
    redis_client.config_resetstat()
    result = store.get_many(range(500), now=T + 1)
    stats = redis_client.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] == shards  # one script call per shard, pipelined
    assert len(result) == 500
    assert sum(p.state == "online" for p in result.values()) == 250


def test_get_many_reads_past_the_script_s_chunk_of_users(store):
    """More ids than get_many.lua reads per chunk: each user's answer is their own, whichever
    chunk they fall in (online, invisible, an HTTP window ended early, never seen)."""
    ids = list(range(2600))
    for i in ids[::3]:
        store.connect(f"c{i}", i, now=T)
    hidden = (5, 1004, 2598)
    for i in hidden:
        store.connect(f"c{i}", i, now=T)
        store.set_status(i, state="invisible", now=T)
    for i in (7, 1007, 2597):  # a touch only: their HTTP window ends before a lease would
        store.touch(i, now=T)
    now = T + store.config.online_window + 1
    many = store.get_many(ids, now=now, activity=True)  # as get reads: the last activity too
    assert list(many) == [str(i) for i in ids]
    for i in (0, 1, 5, 7, 999, 1000, 1002, 1004, 1007, 2001, 2597, 2598, 2599):
        assert many[str(i)] == store.get(i, now=now), i
    assert {many[str(i)].state for i in ids[::3] if i not in hidden} == {"online"}
    assert {many[str(i)].state for i in hidden} == {"offline"}  # invisible to the public
    assert many["1007"].state == "offline" and many["1007"].last_seen == T


@pytest.mark.parametrize("shards", [1, 3])
def test_sharded_store_gives_the_same_answers(make_store, shards):
    store = make_store(shards=shards)
    for i in range(20):
        store.connect(f"c{i}", i, now=T + i)
        store.join("r", f"c{i}", i, now=T + i)
    assert store.online(now=T + 30) == [str(i) for i in range(19, -1, -1)]
    assert store.online(offset=5, limit=5, now=T + 30) == ["14", "13", "12", "11", "10"]
    assert store.online_count(now=T + 30) == 20
    assert store.room_members("r", now=T + 30) == [str(i) for i in range(20)]
    assert store.rooms() == [("r", 20)]
    tags = {k.split("}")[0] + "}" for k in all_keys(store.client)}
    assert tags == {f"{{presence:{s}}}" for s in range(shards)}
    assert len(store.sweep(now=T + 200)) == 40


def test_key_prefix_separates_stores(make_store):
    a = make_store(prefix="app_a")
    b = make_store(prefix="app_b")
    a.touch(1, now=T)
    assert b.online(now=T) == []
    assert a.online(now=T) == ["1"]
    assert b.clear() == 0
    assert a.clear() > 0
    assert a.online(now=T) == []


# -- clock ------------------------------------------------------------------------------------
def test_without_now_the_redis_clock_is_used(store):
    seconds, micros = store.client.time()
    store.connect("c", 1)
    p = store.get(1)
    assert p.state == "online"
    assert abs(p.last_active - (seconds + micros / 1e6)) < 5


# -- robustness -------------------------------------------------------------------------------
def test_bad_ids_are_refused(store):
    for bad in ("", "x" * 300, "a\nb", None, 1.5, True):
        with pytest.raises(InvalidInput):
            store.touch(bad)
    for bad in ("", "a|b", "a b", "x" * 200, None):
        with pytest.raises(InvalidInput):
            store.connect(bad, 1)
    with pytest.raises(InvalidInput):
        store.online(offset=-1)
    # the heartbeat batch is checked as a whole, and each bad pair still refused: beside an
    # integer user (checked pair by pair) and in a batch of text users (checked at once)
    for bad in [("a\nb", 1), ("a|b", 1), ("", 1), ("c", ""), ("c", "a\x00"), ("c", None), (7, 1)]:
        with pytest.raises(InvalidInput):
            store.heartbeat_many([("ok", 1), bad])
    bad_cids = [(cid, "2") for cid in ("a\nb", "a|b", "a b", "é", "", "x" * 129)]
    for bad in [*bad_cids, ("c", ""), ("c", "a\x00"), ("c", "x" * 256)]:
        with pytest.raises(InvalidInput):
            store.heartbeat_many([("ok", "1"), bad])
    assert store.heartbeat_many([("ok", 1), ("fine", 2)], now=T) == [("ok", "1"), ("fine", "2")]


def test_scripts_are_reloaded_after_a_script_flush(store):
    store.connect("c", 1, now=T)
    store.client.script_flush()
    assert store.get(1, now=T).state == "online"
    store.client.script_flush()
    assert store.get_many([1, 2], now=T)["1"].state == "online"


async def test_async_face_shares_the_api(backend, request):
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
        assert kinds(await astore.connect("c", 1, now=T)) == [("online", "1", None, "online")]
        assert await astore.heartbeat_many([("c", 1), ("x", 2)], now=T + 1) == [("x", "2")]
        assert kinds(await astore.join("r", "c", 1, now=T + 1)) == [("join", "1", "r", "online")]
        assert (await astore.get(1, now=T + 2)).state == "online"
        assert await astore.online(now=T + 2) == ["1"]
        assert await astore.online_count(now=T + 2) == 1
        assert await astore.room_members("r", now=T + 2) == ["1"]
        client.script_flush()  # the async face reloads its scripts too
        changes = await astore.sweep(now=T + 200)
        assert kinds(changes) == [("leave", "1", "r", "offline"), ("offline", "1", None, "offline")]
    finally:
        await astore.aclose()


def test_room_members_among_many_ids(store):
    """Asked of more ids than one Lua unpack takes (the names endpoint's bound is a setting):
    the same members as the whole room's list, in its order."""
    for i in range(2500):
        store.connect(f"c{i}", i, now=T)
    for i in range(0, 2500, 2):
        store.join("big", f"c{i}", i, now=T + i / 1000)
    among = list(range(-100, 9000))
    assert store.room_members("big", now=T + 5, among=among) == [str(i) for i in range(0, 2500, 2)]
    assert store.room_members("big", now=T + 5, among=[1, 3, 4, 2]) == ["2", "4"]
    assert store.room_members("big", now=T + 5, among=[]) == []
