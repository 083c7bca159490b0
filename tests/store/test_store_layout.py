"""The store's key layout (docs/store-layout.md), on real Redis (one server and the 3-master
cluster): ``Store(client, config)``.

Covered: connect, heartbeat_many, disconnect, get_many, online, online_count and sweep, for users
without rooms or a status: the registry for a plain user's one connection, the record for
several, process leases (kill -9), the grace, the stale-listing sweep and the registry cleaner;
rooms, statuses, idle, HTTP-only users, live room state, erasure and export.
"""

import json

import pytest
import redis

from presence_app.store import (
    AsyncStore,
    Store,
    StoreConfig,
    TooManyConnections,
    UnknownConnection,
)
from presence_app.store.keys import KeySpace, registry_bucket
from presence_app.store.plans import json_array

T = 1_800_000_000.0
LEASE, GRACE = 90.0, 20.0


@pytest.fixture
def make3(backend):
    """Layout-3 stores on the current backend, each its own process: make3(**StoreConfig)."""
    client, shards = backend

    def make(**config):
        return Store(client, StoreConfig(**{"shards": shards, **config}))

    return make


def keys_of(client) -> list[str]:
    if isinstance(client, redis.RedisCluster):
        found = client.keys(target_nodes=redis.RedisCluster.PRIMARIES)
    else:
        found = client.keys("*")
    return sorted(k.decode() for k in found)


def kinds(transitions) -> list[tuple[str, str]]:
    return [(t.kind, t.user_id) for t in transitions]


def test_a_plain_user_is_one_listing_and_one_registry_field(make3):
    store = make3()
    client = store.client
    assert kinds(store.connect("c1", "u1", now=T)) == [("online", "u1")]
    tag = store.keys.tag_for_user("u1")
    assert tag.endswith(":3")
    bucket = KeySpace.registry(tag, registry_bucket("u1", store.config.registry_buckets))
    # Python's bucket is Lua's: the field is where keys.registry_bucket says
    value = client.hget(bucket, "u1").decode().split("\x1f")
    assert value[:2] == [store.plans.process, "c1"] and float(value[2]) == T
    assert client.zscore(KeySpace.seen(tag), "u1") == T
    assert client.hget(KeySpace.records(tag), "u1") is None  # no record while plain
    p = store.get("u1", now=T + 1)
    assert (p.state, p.last_seen, p.message) == ("online", T + 1, "")
    assert not any(":2" in k.split("}")[1][:2] for k in keys_of(client))  # no layout-2 key


def test_heartbeats_keep_a_user_and_report_the_unlisted(make3):
    store = make3()
    store.connect("c1", "u1", now=T)
    for t in (T + 60, T + 120, T + 180):
        assert store.heartbeat_many([("c1", "u1"), ("c9", "u9")], now=t) == [("c9", "u9")]
        assert store.sweep(now=t + 1) == []
    assert store.get("u1", now=T + 181).state == "online"
    assert store.heartbeat("c1", "u1", now=T + 200)
    assert not store.heartbeat("c9", "u9", now=T + 200)


def test_devices_roll_up_and_the_grace_has_no_flicker(make3):
    store = make3()
    store.connect("phone", "u1", now=T)
    assert store.connect("laptop", "u1", now=T + 1) == []  # already online: nothing to tell
    tag = store.keys.tag_for_user("u1")
    assert store.client.hget(KeySpace.records(tag), "u1") is not None  # two connections: a record
    assert store.disconnect("phone", "u1", now=T + 2) == []
    assert store.sweep(now=T + 2 + GRACE + 1) == []  # the laptop holds them
    assert store.get("u1", now=T + 30).state == "online"
    assert store.client.hget(KeySpace.records(tag), "u1") is None  # one connection again: plain
    # the last one closes: a reload within the grace shows nothing
    store.disconnect("laptop", "u1", now=T + 40)
    assert store.get("u1", now=T + 45).state == "online"
    assert store.connect("laptop2", "u1", now=T + 50) == []
    assert store.sweep(now=T + 40 + GRACE + 1) == []
    # closed for good: offline once the grace has run, with the close as last seen
    store.disconnect("laptop2", "u1", now=T + 70)
    assert store.sweep(now=T + 70 + GRACE - 1) == []
    gone = store.sweep(now=T + 70 + GRACE + 1)
    assert kinds(gone) == [("offline", "u1")] and gone[0].at == T + 70
    p = store.get("u1", now=T + 100)
    assert (p.state, p.last_seen) == ("offline", T + 70)
    assert store.sweep(now=T + 200) == []  # announced once
    assert store.online(now=T + 100) == [] and store.online_count(now=T + 100) == 0


def test_a_heartbeat_written_after_its_connection_closed_does_not_outlive_the_grace(make3):
    """A heartbeat batch on its way while its connection closes lands after the close: the
    user's presence still ends with the grace, not LEASE_TTL after that heartbeat; the
    connection is reported missing, as is one the grace began without (its process stalled past
    its lease, so the other connection's close saw no live one left): its owner, holding the
    socket, connects again. One in a room is held closing: its beat opens it again."""
    store = make3()
    store.connect("tab", "u1", now=T)
    store.disconnect("tab", "u1", now=T + 1)
    # missing: the session, closed, does not connect again
    assert store.heartbeat_many([("tab", "u1")], now=T + 1.5) == [("tab", "u1")]
    gone = store.sweep(now=T + 1 + GRACE + 1)
    assert kinds(gone) == [("offline", "u1")]
    assert store.get("u1", now=T + 1 + GRACE + 2).state == "offline"

    a, b = make3(), make3()  # two processes, a connection of u2 on each
    a.connect("phone", "u2", now=T)
    b.connect("laptop", "u2", now=T)
    b.client.zrem(KeySpace.procs(b.keys.tag_for_user("u2")), b.plans.process)  # b stalls
    a.disconnect("phone", "u2", now=T + 1)  # no live connection left: a grace begins
    assert b.heartbeat_many([("laptop", "u2")], now=T + 2) == [("laptop", "u2")]  # b is back
    b.connect("laptop", "u2", now=T + 2.1)  # as its session does: the grace ends
    assert a.sweep(now=T + 1 + GRACE + 1) == []
    assert a.get("u2", now=T + 1 + GRACE + 2).state == "online"

    # A connection in a room closes and beats again (a resumed stream whose old one closed
    # late): open again, in its room; the process
    # closes it for good with another disconnect (the coalescer's, for a closed owner).
    store.connect("stream", "u3", now=T)
    store.join("doc", "stream", "u3", now=T)
    store.disconnect("stream", "u3", now=T + 1)
    assert store.heartbeat_many([("stream", "u3")], now=T + 1.5) == []
    assert store.sweep(now=T + 1 + GRACE + 1) == []
    assert store.room_members("doc", now=T + 1 + GRACE + 2) == ["u3"]
    store.disconnect("stream", "u3", now=T + 30)
    gone = store.sweep(now=T + 30 + GRACE + 1)
    assert sorted(kinds(gone)) == [("leave", "u3"), ("offline", "u3")]

    # The same while another device of the user is open (no grace of the user's, only the
    # connection's): its beat opens it again too, and the room keeps it past that grace.
    store.connect("desk", "u4", now=T)
    store.connect("stream", "u4", now=T)
    store.join("doc", "stream", "u4", now=T)
    store.disconnect("stream", "u4", now=T + 1)
    assert store.heartbeat_many([("desk", "u4"), ("stream", "u4")], now=T + 1.5) == []
    assert store.sweep(now=T + 1 + GRACE + 1) == []  # no leave
    assert store.room_members("doc", now=T + 1 + GRACE + 2) == ["u4"]
    store.disconnect("stream", "u4", now=T + 30)
    assert kinds(store.sweep(now=T + 30 + GRACE + 1)) == [("leave", "u4")]


def test_a_killed_process_has_its_users_evicted_within_the_lease(make3):
    a, b = make3(), make3()  # two processes on one Redis
    assert a.plans.process != b.plans.process
    for i in range(5):
        a.connect(f"a{i}", f"ua{i}", now=T)
    b.connect("b0", "ub", now=T)
    a.connect("a-both", "both", now=T)  # a user on both processes
    b.connect("b-both", "both", now=T)
    # a is killed (no more heartbeats, no disconnect); b beats on
    for t in (T + 30, T + 60, T + 89):
        b.heartbeat_many([("b0", "ub"), ("b-both", "both")], now=t)
        assert b.sweep(now=t) == []
    b.heartbeat_many([("b0", "ub"), ("b-both", "both")], now=T + 91)
    gone = b.sweep(now=T + LEASE + 1)  # the bound: LEASE_TTL (+ the sweep's interval)
    assert sorted(kinds(gone)) == [("offline", f"ua{i}") for i in range(5)]
    assert b.get("both", now=T + 92).state == "online"
    assert sorted(b.online(now=T + 92)) == ["both", "ub"]
    # the dead process's connection left the user's record: b's close ends them
    b.disconnect("b-both", "both", now=T + 100)
    assert kinds(b.sweep(now=T + 100 + GRACE + 1)) == [("offline", "both")]
    tag = b.keys.tag_for_user("both")
    assert b.client.zscore(KeySpace.procs(tag), a.plans.process) is None


def test_a_silent_connection_of_a_live_process(make3):
    """The process leaves a silent socket out of its batches: a user with no other connection
    goes offline after LEASE_TTL and the socket's next heartbeat is told to connect again."""
    store = make3()
    store.connect("loud", "u1", now=T)
    store.connect("silent", "u2", now=T)
    store.heartbeat_many([("loud", "u1")], now=T + 60)
    assert kinds(store.sweep(now=T + LEASE + 1)) == [("offline", "u2")]
    assert store.heartbeat_many([("loud", "u1"), ("silent", "u2")], now=T + 92) == [
        ("silent", "u2")
    ]
    assert kinds(store.connect("silent2", "u2", now=T + 93)) == [("online", "u2")]
    store.disconnect("silent", "u2", now=T + 94)  # the old socket's close changes nothing
    assert store.get("u2", now=T + 95).state == "online"
    assert store.sweep(now=T + 94 + GRACE + 1) == []


def test_windows_and_counts(make3):
    store = make3()
    store.connect("c1", "u1", now=T)
    store.connect("c2", "u2", now=T + 30)
    store.connect("c3", "u3", now=T + 50)
    assert store.online(now=T + 60) == ["u3", "u2", "u1"]
    assert store.online(window=20, now=T + 60) == ["u3"]
    assert store.online_count(window=40, now=T + 60) == 2 and store.online_count(now=T + 60) == 3
    assert store.online(limit=1, offset=1, now=T + 60) == ["u2"]
    assert store.online(now=T + 100) == ["u3", "u2"]  # u1's lease ran out: not swept yet


def test_the_registry_cleaner_removes_a_dead_process_s_fields(make3):
    a, b = make3(registry_buckets=8), make3(registry_buckets=8)
    for i in range(20):
        a.connect(f"c{i}", f"u{i}", now=T)
    b.connect("cb", "ub", now=T)
    b.heartbeat_many([("cb", "ub")], now=T + 80)
    assert len(b.sweep(now=T + LEASE + 1)) == 20
    fields = [
        (uid, value)
        for tag in b.keys.all_tags()
        for n in range(8)
        for uid, value in b.client.hgetall(KeySpace.registry(tag, n)).items()
    ]
    assert fields == [(b"ub", fields[0][1])] and fields[0][1].startswith(b.plans.process.encode())


def test_an_http_only_user_is_one_web_entry(make3):
    store = make3()
    assert kinds(store.touch("u1", now=T)) == [("online", "u1")]
    assert store.touch("u1", now=T + 10) == []
    tag = store.keys.tag_for_user("u1")
    # one index: their last request in seen, negated (the sign tells the kind); no web set
    assert store.client.zscore(KeySpace.seen(tag), "u1") == -(T + 10)
    assert store.client.exists(f"{tag}:web") == 0
    assert store.client.hget(KeySpace.records(tag), "u1") is None  # every request was activity
    p = store.get("u1", now=T + 20)
    assert (p.state, p.last_seen, p.last_active) == ("online", T + 20, T + 10)
    assert store.online(now=T + 20) == ["u1"] and store.online_count(now=T + 20) == 1
    store.connect("c2", "u2", now=T + 15)
    assert store.online(now=T + 20) == ["u2", "u1"]  # both indexes, merged by score
    assert store.sweep(now=T + 10 + 60 - 1) == []
    gone = store.sweep(now=T + 10 + 60 + 1)  # ONLINE_WINDOW after the last request
    assert kinds(gone) == [("offline", "u1")] and gone[0].at == T + 10
    p = store.get("u1", now=T + 80)
    assert (p.state, p.last_seen) == ("offline", T + 10)


def test_a_connected_plain_users_last_activity_is_read_when_asked(make3):
    """A plain connected user's last activity is in their registry field, not a record: a read
    asks for it (get does; get_many with activity=True), a page of dots does without."""
    store, other = make3(), make3()
    store.connect("c1", "u1", now=T)  # a connection opening is activity
    store.activity("u1", now=T + 30)
    other.connect("c2", "u2", now=T)
    store.set_status("u2", message="away", now=T + 1)  # a record, without a last activity
    store.connect("c3", "u3", now=T)
    store.set_status("u3", "invisible", now=T + 1)
    store.connect("c4", "u4", now=T)
    store.disconnect("c4", "u4", now=T + 2)
    store.sweep(now=T + 2 + GRACE + 1)
    now, ids = T + 40, ["u1", "u2", "u3", "u4", "never"]
    assert {u: p.last_active for u, p in store.get_many(ids, now=now).items()} == dict.fromkeys(ids)
    read = store.get_many(ids, now=now, activity=True)
    # the invisible user reads as offline to others, with no activity; offline users show none
    assert {u: p.last_active for u, p in read.items()} == {
        "u1": T + 30,
        "u2": T,
        "u3": None,
        "u4": None,
        "never": None,
    }
    assert store.get_many(["u3"], now=now, reveal_all=True, activity=True)["u3"].last_active == T
    # the registry fields are read for the connected only (seen, or hidden: after offline ones)
    late = store.get_many(["u4", "never", "u3", "u1"], now=now, reveal_all=True, activity=True)
    assert {u: p.last_active for u, p in late.items()} == {
        "u4": None,
        "never": None,
        "u3": T,
        "u1": T + 30,
    }
    assert store.get("u1", now=now).last_active == T + 30
    # with the activity read, a presence is the same otherwise
    plain = store.get_many(ids, now=now)
    assert {u: p.state for u, p in read.items()} == {u: p.state for u, p in plain.items()}


def test_http_then_a_socket_then_http(make3):
    store = make3()
    store.touch("u1", now=T)
    assert store.connect("c1", "u1", now=T + 5) == []  # already online by HTTP
    tag = store.keys.tag_for_user("u1")
    assert store.client.zscore(KeySpace.seen(tag), "u1") == T + 5  # by the connection now
    store.disconnect("c1", "u1", now=T + 10)
    store.touch("u1", now=T + 20)  # a request within the grace: the window holds them
    assert store.sweep(now=T + 10 + GRACE + 1) == []
    assert store.get("u1", now=T + 40).state == "online"
    assert kinds(store.sweep(now=T + 20 + 60 + 1)) == [("offline", "u1")]


def test_a_request_while_connected_holds_the_user_for_its_window_after_the_close(make3):
    """Online while a connection holds them or a request was made within ONLINE_WINDOW: the
    window of a request made while connected outlives the connection's close (kept with the
    connection: the registry field, or the record of a user with rooms or several)."""
    store = make3()
    for uid, rooms in (("u1", []), ("u2", ["doc"])):
        store.touch(uid, now=T)  # HTTP first: its window goes with the connection
        store.connect(f"{uid}-a", uid, now=T + 5)
        for room in rooms:
            store.join(room, f"{uid}-a", uid, now=T + 5)
        store.connect(f"{uid}-b", uid, now=T + 6)
        store.touch(uid, now=T + 20)  # a request while connected
        store.disconnect(f"{uid}-a", uid, now=T + 25)
        store.disconnect(f"{uid}-b", uid, now=T + 30)
    # u2's room is left with its connection's grace; neither goes offline with it
    assert kinds(store.sweep(now=T + 30 + GRACE + 1)) == [("leave", "u2")]
    assert store.get_many(["u1", "u2"], now=T + 79).keys() == {"u1", "u2"}
    assert {p.state for p in store.get_many(["u1", "u2"], now=T + 79).values()} == {"online"}
    gone = store.sweep(now=T + 20 + 60 + 1)  # ONLINE_WINDOW after the request
    assert sorted(kinds(gone)) == [("offline", "u1"), ("offline", "u2")]

    store.touch("u3", now=T)  # an HTTP-only user connects and closes at once
    store.connect("u3-a", "u3", now=T + 1)
    store.disconnect("u3-a", "u3", now=T + 2)
    assert store.sweep(now=T + 2 + GRACE + 1) == []
    assert kinds(store.sweep(now=T + 60 + 1)) == [("offline", "u3")]


def test_a_window_longer_than_the_lease_holds_a_connected_user_past_it(make3):
    """ONLINE_WINDOW > LEASE_TTL: a request holds its user for the window, also while (and
    after) a connection holds them for less: a later end in K_UNTIL, which heartbeats keep
    until they carry the user past it, and which the listings and the sweep honour."""
    store, killed = make3(online_window=120), make3(online_window=120)
    killed.connect("k1", "u1", now=T)
    killed.touch("u1", now=T + 10)  # then the process dies: its lease runs out at T + 100
    killed.touch("u3", now=T)  # HTTP only, then a socket on the process that dies
    killed.connect("k3", "u3", now=T + 5)
    store.connect("c2", "u2", now=T)
    store.touch("u2", now=T + 1)  # a window to T + 121
    store.heartbeat_many([("c2", "u2")], now=T + 20)  # the lease alone: T + 110
    store.disconnect("c2", "u2", now=T + 25)  # the grace ends before the window
    now = T + 101  # past u1's and u3's span (T + 100, T + 95), within their windows
    assert store.sweep(now=now) == []
    assert store.online(now=now) == ["u2", "u1", "u3"]  # most recently seen first
    assert store.online_count(now=now) == 3
    assert {
        u: p.state for u, p in store.get_many(["u1", "u2", "u3"], now=now).items()
    } == dict.fromkeys(["u1", "u2", "u3"], "online")
    gone = store.sweep(now=T + 121)
    assert sorted(kinds(gone)) == [("offline", "u3")]
    gone = store.sweep(now=T + 122)
    assert sorted(kinds(gone)) == [("offline", "u2")]
    gone = store.sweep(now=T + 131)
    assert sorted(kinds(gone)) == [("offline", "u1")]
    assert store.online(now=T + 131) == [] and store.online_count(now=T + 131) == 0

    # a connection that beats on carries its user past a window that ends sooner than its span
    store.connect("c4", "u4", now=T)
    store.touch("u4", now=T + 1)
    for t in (T + 30, T + 60, T + 90, T + 120, T + 150):
        store.heartbeat_many([("c4", "u4")], now=t)
        assert store.sweep(now=t) == []
    assert store.get("u4", now=T + 230).state == "online"


def test_idle_is_announced_by_the_process_that_sees_the_activity_stop(make3):
    store = make3()
    devices = [("phone", "u1")]

    def at(t: float) -> float:  # the process's heartbeats up to t (a heartbeat is no activity)
        store.heartbeat_many(devices, now=t)
        return t

    store.connect("phone", "u1", now=T)
    assert store.idle("u1", now=at(T + 100)) == []  # not IDLE_AFTER yet
    at(T + 200)
    changed = store.idle("u1", now=at(T + 301))
    assert [(t.kind, t.state) for t in changed] == [("update", "idle")]
    p = store.get("u1", now=T + 302)
    assert (p.state, p.last_active) == ("idle", T)
    assert store.idle("u1", now=at(T + 380)) == []  # announced once
    changed = store.activity("u1", now=at(T + 450))
    assert [(t.kind, t.state) for t in changed] == [("update", "online")]
    tag = store.keys.tag_for_user("u1")
    assert store.client.hget(KeySpace.records(tag), "u1") is None  # active and plain again
    # another device active meanwhile: the phone's process finds the user active
    store.connect("laptop", "u1", now=at(T + 500))
    devices.append(("laptop", "u1"))
    store.activity("u1", now=at(T + 580))
    assert store.idle("u1", now=at(T + 450 + 301)) == []
    at(T + 800)
    assert kinds(store.idle("u1", now=at(T + 580 + 301))) == [("update", "u1")]
    assert store.get("u1", now=T + 882).state == "idle"
    assert store.connect("tablet", "u1", now=at(T + 900))[0].state == "online"
    assert store.get("u1", now=T + 901).state == "online"


def test_an_http_user_goes_idle_with_a_request_without_activity(make3):
    store = make3()
    store.touch("u1", now=T)
    for t in range(50, 300, 50):
        assert store.touch("u1", activity=False, now=T + t) == []
    changed = store.touch("u1", activity=False, now=T + 301)
    assert [(t.kind, t.state) for t in changed] == [("update", "idle")]
    assert store.get("u1", now=T + 302).state == "idle"
    changed = store.touch("u1", now=T + 320)
    assert [(t.kind, t.state) for t in changed] == [("update", "online")]


def test_forget_announces_the_end_and_leaves_no_key_of_the_user(make3):
    """Erasure: the user's rooms are left and they go offline (announced, as the sweep does),
    then nothing the store keeps names them: record, registry field, indexes, process sets,
    graces, room states. Others stay as they were, "u1|x" (whose room-state fields start with
    "u1|") among them."""
    a, b = make3(), make3()
    client = a.client
    for uid, conns in (("u1", ("c1", "c2")), ("u2", ("c3",)), ("u3", ("c4",)), ("u1|x", ("c5",))):
        for conn in conns:
            (a if conn != "c2" else b).connect(conn, uid, now=T)
    a.join("doc", "c1", "u1", now=T)
    a.join("doc", "c3", "u2", now=T)
    a.join("doc", "c5", "u1|x", now=T)
    states = [("u1", "p1", "c1", '{"x":1}'), ("u2", "p2", "c3", "{}"), ("u1|x", "p5", "c5", "{}")]
    a.set_room_states("doc", states, now=T)
    a.set_status("u1", "dnd", "busy", now=T)
    b.disconnect("c2", "u1", now=T + 1)  # a closed connection in its grace

    assert kinds(a.forget("u1", now=T + 2)) == [("leave", "u1"), ("offline", "u1")]
    assert a.export("u1") == {"user": "u1", "record": {}, "indexes": {}, "connections": []}
    named = [k for k in keys_of(client) if k.split(":")[-1] == "u1"]
    assert named == []
    for key in keys_of(client):  # no member, field or entry names the user
        kind = client.type(key).decode()
        if kind == "zset":
            assert b"u1" not in client.zrange(key, 0, -1), key
        elif kind == "set":
            assert b"u1" not in client.smembers(key), key
        elif ":rs:" in key:  # a room state's fields: "user|public id"
            assert b"u1" not in [f.rsplit(b"|", 1)[0] for f in client.hkeys(key)], key
        elif kind == "hash":  # a record's or a registry's fields: user ids
            assert b"u1" not in client.hkeys(key), key
    assert a.get("u1", now=T + 3).state == "offline"
    assert sorted(a.room_members("doc", now=T + 3)) == ["u1|x", "u2"]
    assert sorted(a.room_states("doc", now=T + 3)) == [("u1|x", "p5", "{}"), ("u2", "p2", "{}")]
    assert [p.state for p in a.get_many(["u2", "u3"], now=T + 3).values()] == ["online"] * 2
    assert a.sweep(now=T + GRACE + 5) == []  # the grace ended with the user: nothing to end
    assert kinds(a.forget("u3", now=T + 6)) == [("offline", "u3")]  # a plain user
    assert kinds(a.forget("u9", now=T + 6)) == []  # an unknown one


def test_room_state_lives_with_its_connection_in_the_room(make3):
    """Live room state (cursors, selections): an entry counts while its connection is in the
    room and its process lives; server state while its user is in the room. A write racing a
    leave writes nothing, and a read prunes what died (a killed process's entries included)."""
    a, b = make3(), make3()
    a.connect("c1", "u1", now=T)
    b.connect("c2", "u2", now=T)
    a.join("doc", "c1", "u1", now=T)
    b.join("doc", "c2", "u2", now=T)
    entries = [("u1", "p1", "c1", '{"x":1}'), ("u2", "p2", "c2", '{"x":2}')]
    assert a.set_room_states("doc", entries, now=T) == entries
    assert sorted(b.room_states("doc", now=T)) == [("u1", "p1", '{"x":1}'), ("u2", "p2", '{"x":2}')]
    b.leave("doc", "c2", "u2", now=T + 1)  # left: not written, not read, and pruned
    assert b.set_room_states("doc", [("u2", "p2", "c2", '{"x":3}')], now=T + 1) == []
    assert b.room_states("doc", now=T + 1) == [("u1", "p1", '{"x":1}')]
    removal = [("u1", "p1", "c1", None)]
    assert a.set_room_states("doc", removal, now=T + 2) == removal  # removed
    assert a.room_states("doc", now=T + 2) == []
    # a's process is killed: past its lease, b's read ignores and prunes a's connection's entry
    a.set_room_states("doc", [("u1", "p1", "c1", '{"x":4}')], now=T + 3)
    b.heartbeat_many([("c2", "u2")], now=T + 60)
    assert b.room_states("doc", now=T + 3 + LEASE + 1) == []
    assert a.room_states("doc", now=T + 4) == []  # pruned, not just hidden
    # server state lives while its user is in the room
    b.join("doc", "c2", "u2", now=T + 100)
    server = [("u2", "server", "", '{"r":1}')]
    assert b.set_room_states("doc", server, now=T + 100) == server
    assert b.set_room_states("doc", [("u9", "server", "", '{"r":1}')], now=T + 100) == []
    assert b.room_states("doc", now=T + 100) == [("u2", "server", '{"r":1}')]
    b.set_status("u2", "invisible", now=T + 101)  # an invisible user's states are not read
    assert b.room_states("doc", now=T + 101) == []
    # nor taken: neither their connection's nor the server's for them
    refused = [("u2", "p2", "c2", '{"x":5}'), ("u2", "server", "", '{"r":2}')]
    assert b.set_room_states("doc", refused, now=T + 102) == []
    b.set_status("u2", "auto", now=T + 103)  # visible again, in the room: nothing was kept
    assert b.room_states("doc", now=T + 103) == []


def test_rooms_live_as_long_as_their_connections_and_a_reload_shows_nothing(make3):
    store, watcher = make3(), make3()
    store.connect("c1", "u1", now=T)
    assert kinds(store.join("lobby", "c1", "u1", now=T)) == [("join", "u1")]
    assert store.join("lobby", "c1", "u1", now=T) == []
    assert store.room_members("lobby", now=T + 1) == ["u1"]
    assert store.user_rooms("u1") == ["lobby"]
    with pytest.raises(UnknownConnection):
        store.join("lobby", "nope", "u1", now=T)
    # a second device in another room; the first one closes: its room is left after the grace
    store.connect("c2", "u1", now=T + 1)
    store.join("design", "c2", "u1", now=T + 1)
    store.disconnect("c1", "u1", now=T + 2)
    assert store.room_members("lobby", now=T + 3) == ["u1"]  # within the grace
    assert kinds(watcher.sweep(now=T + 2 + GRACE + 1)) == [("leave", "u1")]
    assert store.room_members("lobby", now=T + 30) == [] and store.user_rooms("u1") == ["design"]
    # a reload within the grace: no leave, no join, no offline
    store.disconnect("c2", "u1", now=T + 40)
    store.connect("c3", "u1", now=T + 41)
    assert store.join("design", "c3", "u1", now=T + 41) == []
    assert watcher.sweep(now=T + 40 + GRACE + 1) == []
    assert store.room_members("design", now=T + 70) == ["u1"]
    # leaving by hand, then closing for good: leave, then offline
    assert kinds(store.leave("design", "c3", "u1", now=T + 80)) == [("leave", "u1")]
    store.join("design", "c3", "u1", now=T + 81)
    store.disconnect("c3", "u1", now=T + 82)
    gone = watcher.sweep(now=T + 82 + GRACE + 1)
    assert kinds(gone) == [("leave", "u1"), ("offline", "u1")]
    assert store.room_members("design", now=T + 110) == [] and store.user_rooms("u1") == []


def test_a_killed_process_leaves_its_connections_rooms(make3):
    a, b = make3(), make3()
    a.connect("a1", "u1", now=T)
    a.join("lobby", "a1", "u1", now=T)
    b.connect("b1", "u1", now=T)
    b.join("design", "b1", "u1", now=T)
    a.connect("a2", "u2", now=T)
    a.join("lobby", "a2", "u2", now=T)
    b.heartbeat_many([("b1", "u1")], now=T + 60)
    gone = b.sweep(now=T + LEASE + 1)
    assert sorted(kinds(gone)) == [("leave", "u1"), ("leave", "u2"), ("offline", "u2")]
    assert b.room_members("lobby", now=T + 92) == [] and b.room_members("design", now=T + 92) == [
        "u1"
    ]
    assert b.user_rooms("u1") == ["design"] and b.get("u1", now=T + 92).state == "online"


def test_status_dnd_and_invisible(make3):
    store = make3()
    store.connect("c1", "u1", now=T)
    store.join("lobby", "c1", "u1", now=T)
    tag = store.keys.tag_for_user("u2")
    store.connect("c2", "u2", now=T)
    changed = store.set_status("u2", message="lunch", emoji="🍜", device="phone", now=T + 1)
    assert kinds(changed) == [("update", "u2")] and changed[0].message == "lunch"
    assert store.client.hget(KeySpace.records(tag), "u2") is not None  # a status: a record
    p = store.get("u2", now=T + 2)
    assert (p.state, p.message, p.emoji, p.device) == ("online", "lunch", "🍜", "phone")
    assert store.set_status("u2", message="", emoji="", device="", now=T + 3)
    assert store.client.hget(KeySpace.records(tag), "u2") is None  # the default again: no record
    assert kinds(store.set_status("u1", "dnd", now=T + 4)) == [("update", "u1")]
    assert store.get("u1", now=T + 5).state == "dnd"
    # invisible: offline to others, leaving the room; themself and superusers see it
    hidden = store.set_status("u1", "invisible", now=T + 6)
    assert kinds(hidden) == [("leave", "u1"), ("offline", "u1")]
    assert store.get("u1", now=T + 7).state == "offline"
    assert store.get("u1", viewer="u1", now=T + 7).state == "invisible"
    assert store.online(now=T + 7) == ["u2"] and store.room_members("lobby", now=T + 7) == []
    # equal scores: by id, descending (the listing's one order)
    assert store.online(now=T + 7, include_invisible=True) == ["u2", "u1"]
    assert store.heartbeat_many([("c1", "u1")], now=T + 60) == []  # a hidden user beats too
    assert store.state_counts(now=T + 61).invisible == 1
    back = store.set_status("u1", "auto", now=T + 70)
    assert kinds(back) == [("online", "u1"), ("join", "u1")]
    assert store.room_members("lobby", now=T + 71) == ["u1"]
    counts = store.state_counts(now=T + 71)
    assert (counts.online, counts.dnd, counts.invisible, counts.total) == (2, 0, 0, 2)


def test_the_state_counts_count_http_only_users(make3):
    """They are listed in their own index (web), beside the connected users (seen)."""
    store = make3()
    store.connect("c1", "u1", now=T)
    store.touch("u2", now=T)
    store.touch("u3", now=T)
    store.set_status("u3", "dnd", now=T)
    counts = store.state_counts(now=T + 1)
    assert (counts.online, counts.dnd, counts.total, counts.exact) == (2, 1, 3, True)
    assert store.online_count(now=T + 1) == counts.total
    none = store.state_counts(limit=0, now=T + 1)
    assert (none.total, none.counted, none.exact, none.online) == (3, 0, False, 0)
    if len(store.keys.all_tags()) == 1:  # the limit is a shard's
        few = store.state_counts(limit=2, now=T + 1)  # the connected first, then the HTTP-only
        assert (few.total, few.counted, few.online + few.dnd) == (3, 2, 2)


async def test_the_async_face(presence_redis_url, redis_client):
    import redis.asyncio as aredis

    client = aredis.Redis.from_url(presence_redis_url)
    try:
        store = AsyncStore(client, StoreConfig())
        assert kinds(await store.connect("c1", "u1", now=T)) == [("online", "u1")]
        assert (await store.get("u1", now=T + 1)).state == "online"
        assert await store.heartbeat_many([("c1", "u1")], now=T + 30) == []
        assert kinds(await store.sweep(now=T + 200)) == [("offline", "u1")]
    finally:
        await client.aclose()


def script_calls(client) -> int:
    """How many script calls the server (every primary) has run."""
    if isinstance(client, redis.RedisCluster):
        stats = client.info("commandstats", target_nodes=redis.RedisCluster.PRIMARIES).values()
    else:
        stats = [client.info("commandstats")]
    return sum(s.get("cmdstat_evalsha", {}).get("calls", 0) for s in stats)


@pytest.mark.parametrize(
    "ids",
    [["1", "22", "u3"], ["ü", "日本", "a b"], ['a"b', "c"], ["a\\b"], ['"', "\\", '\\"'], ["x"]],
)
def test_the_ids_of_a_read_go_to_its_script_as_a_json_array(ids):
    assert json.loads(json_array(ids)) == ids


def test_get_many_is_one_short_script_a_shard(make3):
    """get_many reads, in one script call a shard, the clock, seen, until and the records of
    every id, and hidden, web and last only of those with no seen score. Each answer is the
    user's own, on the server's clock as on a given one, ids that need escaping included, in
    store.gather too, and past the 1,000 ids of a call."""
    store = make3()
    client = store.client
    odd = 'ü "s:er/1\\'  # escaped in its key and in the script's JSON argument
    for conn, uid in (("c1", "u1"), ("c2", odd), ("c3", "dnd"), ("c4", "ghost"), ("c5", "gone")):
        store.connect(conn, uid, now=T)
    store.set_status(odd, message="lunch", emoji="🍜", now=T)
    store.set_status("dnd", "dnd", now=T)
    store.set_status("ghost", "invisible", now=T)
    store.touch("web", now=T)
    store.disconnect("c5", "gone", now=T)
    store.sweep(now=T + GRACE + 1)
    connected = ["u1", odd, "dnd"]
    everyone = [*connected, "ghost", "web", "gone", "nobody"]
    at = T + GRACE + 2
    store.get_many(everyone)  # the script loaded on every node (a NOSCRIPT reply is a call)

    before = script_calls(client)
    found = store.get_many(connected, now=at)
    assert script_calls(client) - before == len({store.keys.tag_for_user(u) for u in connected})
    assert [found[u].state for u in connected] == ["online", "online", "dnd"]
    assert (found[odd].message, found[odd].emoji) == ("lunch", "🍜")

    before = script_calls(client)
    found = store.get_many(everyone, now=at)
    assert script_calls(client) - before == len({store.keys.tag_for_user(u) for u in everyone})
    assert list(found) == everyone
    states = {u: p.state for u, p in found.items()}
    assert states == {
        "u1": "online",
        odd: "online",
        "dnd": "dnd",
        "ghost": "offline",
        "web": "online",
        "gone": "offline",
        "nobody": "offline",
    }
    assert found["gone"].last_seen == T and found["nobody"].last_seen is None
    assert found["web"].last_active == T and found["ghost"].last_seen == T  # frozen
    assert store.get("ghost", viewer="ghost", now=at).state == "invisible"
    # the server's clock: the same answers now (the listings are fresh on no clock of ours)
    fresh = make3()
    fresh.connect("c9", "u9")
    fresh.touch("w9")
    assert {u: p.state for u, p in fresh.get_many(["u9", "w9", "x9"]).items()} == {
        "u9": "online",
        "w9": "online",
        "x9": "offline",
    }
    # gather: beside another call
    presences, members = store.gather(
        store.planned.get_many(everyone, now=at), store.planned.room_members("lobby", now=at)
    )
    assert {u: p.state for u, p in presences.items()} == states and members == []
    # more ids than one call reads
    many = [f"n{i}" for i in range(2500)] + everyone
    assert {u: p.state for u, p in store.get_many(many, now=at).items() if u in states} == states


@pytest.mark.cluster
async def test_the_async_face_reads_on_the_cluster(redis_cluster):
    import redis.asyncio as aredis

    client = aredis.RedisCluster.from_url(redis_cluster.url)
    try:
        store = AsyncStore(client, StoreConfig(shards=4))
        for i in range(8):
            await store.connect(f"c{i}", f"u{i}", now=T)
        await store.set_status("u1", "invisible", now=T)
        await store.set_status("u2", message="hi", now=T)
        found = await store.get_many([f"u{i}" for i in range(10)], now=T + 1)
        assert [p.state for p in found.values()] == [
            "online",
            "offline",
            "online",
            *["online"] * 5,
            "offline",
            "offline",
        ]
        assert found["u2"].message == "hi"
        assert (await store.get("u1", viewer="u1")).state == "invisible"
    finally:
        await client.aclose()


def test_an_offline_user_s_record_expires_after_the_metadata_ttl(make3):
    """Records are fields of one hash a shard; an unlisted user's expires METADATA_TTL after it
    was last saved (the sweep drops it, as a key's own expiry would), a listed user's never."""
    store = make3(metadata_ttl=1000)
    tag = store.keys.tag_for_user("away")
    records, expiry = KeySpace.records(tag), KeySpace.record_expiry(tag)
    for conn, uid in (("c1", "away"), ("c2", "here")):
        store.connect(conn, uid, now=T)
        store.set_status(uid, message="brb", now=T)
    store.disconnect("c1", "away", now=T + 1)
    assert kinds(store.sweep(now=T + GRACE + 2)) == [("offline", "away")]
    assert store.client.zscore(expiry, "away") == T + GRACE + 2 + 1000
    assert store.client.zscore(expiry, "here") is None  # listed: no expiry
    store.heartbeat_many([("c2", "here")], now=T + 999)
    store.sweep(now=T + 1000)
    assert store.get("away", now=T + 1000).message == "brb"  # kept while offline, until...
    store.heartbeat_many([("c2", "here")], now=T + GRACE + 1003)
    store.sweep(now=T + GRACE + 1003)
    assert store.client.hget(records, "away") is None and store.client.zcard(expiry) == 0
    assert store.get("away", now=T + GRACE + 1004).message == ""
    assert store.get("here", now=T + GRACE + 1004).message == "brb"


def test_a_read_presence_is_what_its_fields_say_whatever_is_read_first(make3):
    """The store's presences (a plain user's a copy of shared fields, ``meta`` made when first
    read): in whatever order their fields are read, compared, printed, pickled or copied, each
    is the presence built with the fields a first read found."""
    import copy
    import dataclasses
    import pickle

    from presence_app.store import Presence

    store = make3()
    store.connect("a", "1", now=T)  # online, plain
    store.connect("c", "3", now=T)
    store.set_status("3", "dnd", message="focus", emoji="🎧", device="desk", now=T)
    store.touch("4", now=T)
    store.set_status("4", "invisible", message="hidden", team="x", now=T)
    store.touch("5", now=T)  # HTTP only
    store.set_status("5", message="lunch", emoji="🍜", expires_in=10, k=[1], now=T)
    store.touch("6", now=T)  # HTTP only, plain
    ids = ["1", "3", "4", "5", "6", "7"]
    names = [f.name for f in dataclasses.fields(Presence)]
    first = store.get_many(ids, viewer="1", now=T + 20)
    expected = {u: Presence(**{n: getattr(p, n) for n in names}) for u, p in first.items()}
    assert [expected[u].state for u in ids] == ["online", "dnd", "offline", "online", "online"] + [
        "offline"
    ]
    assert expected["5"].meta == {"k": [1]} and expected["5"].message == ""  # expired
    assert expected["1"].meta == {} and expected["6"].last_active == T
    for order in (names, names[::-1], ["meta", "message", "state"]):
        for uid, p in store.get_many(ids, viewer="1", now=T + 20).items():
            for name in order:
                assert getattr(p, name) == getattr(expected[uid], name), (uid, name)
            assert p == expected[uid] and repr(p) == repr(expected[uid])
    assert store.get_many(ids, viewer="1", now=T + 20) == expected
    for uid, p in store.get_many(ids, viewer="1", now=T + 20).items():
        assert pickle.loads(pickle.dumps(p)) == expected[uid]
        assert copy.copy(p) == copy.deepcopy(p) == expected[uid]
        assert dataclasses.asdict(p) == dataclasses.asdict(expected[uid])
        assert p.as_dict() == expected[uid].as_dict()
        assert dataclasses.replace(p, message="x") == dataclasses.replace(
            expected[uid], message="x"
        )
        p.meta["mine"] = 1  # each presence's own dict
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.state = "online"
    assert store.get("1", now=T + 20).meta == {}


def test_a_client_that_decodes_replies_reads_the_same(make3, presence_redis_url, request):
    """A project's own client may decode replies to str (``decode_responses=True``): the store
    reads and writes through it as through one that does not (get_many's codes, records,
    scores and registry fields come as str)."""
    store = make3()
    if store.cluster:
        node = store.client.get_default_node()
        client = redis.RedisCluster(host=node.host, port=node.port, decode_responses=True)
    else:
        client = redis.Redis.from_url(presence_redis_url, decode_responses=True)
    request.addfinalizer(client.close)
    text = Store(client, store.config)
    store.connect("c1", "u1", now=T)
    text.connect("c2", "u2", now=T)
    text.set_status("u2", message="lunch", emoji="🥪", now=T + 1)
    text.connect("c3", "u3", now=T)
    text.disconnect("c3", "u3", now=T + 2)
    text.sweep(now=T + 2 + GRACE + 1)
    store.touch("u4", now=T + 30)
    ids, now = ["u1", "u2", "u3", "u4", "never"], T + 40
    for activity in (False, True):
        assert text.get_many(ids, now=now, activity=activity) == store.get_many(
            ids, now=now, activity=activity
        )
    read = text.get_many(ids, now=now, activity=True)
    assert [read[u].state for u in ids] == ["online", "online", "offline", "online", "offline"]
    assert (read["u2"].message, read["u2"].emoji) == ("lunch", "🥪")


def test_no_late_write_undoes_an_erasure_until_the_hold_ends(make3):
    """For LEASE_TTL (or ONLINE_WINDOW, the longer) plus DISCONNECT_GRACE after a forget, the
    user's touches, connections and statuses write nothing (they were on their way: another
    process's batch, a socket not closed yet); then the user may be seen again. The hold keeps
    no id in clear."""
    a, b = make3(), make3()
    a.connect("c1", "u1", now=T)
    a.touch("u2", now=T)
    a.forget("u1", now=T + 1)
    hold = max(a.config.lease_ttl, a.config.online_window) + a.config.disconnect_grace
    late = T + hold  # still within it
    assert b.touch_many([("u1", True), ("u2", True)], now=late) == []  # u2 is online already
    assert b.connect("c2", "u1", now=late) == []
    assert b.set_status("u1", "dnd", "late", now=late) == []
    assert b.heartbeat_many([("c1", "u1")], now=late) == [("c1", "u1")]
    assert b.get("u1", now=late).state == "offline"
    assert a.export("u1") == {"user": "u1", "record": {}, "indexes": {}, "connections": []}
    assert not any(
        b"u1" in m
        for k in keys_of(a.client)
        if a.client.type(k) == b"zset"
        for m in a.client.zrange(k, 0, -1)
    )
    assert kinds(b.touch("u1", now=T + 1 + hold + 1)) == [("online", "u1")]  # over


def test_a_connection_past_the_users_limit_is_refused_and_takes_nothing(make3):
    """connect(..., max_connections=N) counts the user's open connections as it takes one
    (atomically: two processes' opens at once cannot both pass): past N it raises and writes
    nothing; a connection in its grace, or the same connection again, does not count."""
    a, b = make3(), make3()
    assert kinds(a.connect("c1", "u1", now=T, max_connections=2)) == [("online", "u1")]
    b.connect("c2", "u1", now=T, max_connections=2)
    with pytest.raises(TooManyConnections):
        a.connect("c3", "u1", now=T, max_connections=2)
    assert a.export("u1")["connections"] == ["c1", "c2"]
    a.connect("c1", "u1", now=T + 1, max_connections=2)  # the same one again (a resumed stream)
    b.disconnect("c2", "u1", now=T + 1)  # in its grace: not open
    a.connect("c3", "u1", now=T + 1, max_connections=2)
    assert kinds(a.connect("c9", "u2", now=T + 1, max_connections=1)) == [("online", "u2")]
    assert sorted(a.export("u1")["connections"]) == ["c1", "c3"]  # c2 closed: its grace only


async def test_a_read_after_a_write_in_one_round_trip_sees_it_after_noscript(
    presence_redis_url, redis_client
):
    """A round trip's calls run in order: a status set, then the user read back, reads the
    status. After a SCRIPT FLUSH (a Redis restart) with only the read's script loaded again, the
    write failed NOSCRIPT and the read ran without it; repeating the failed write alone left
    the read stale (a socket's own update showed an emoji it had just set as none)."""
    import redis.asyncio as aredis

    from presence_app.store import scripts

    def flushed() -> None:
        redis_client.script_flush()
        redis_client.script_load(scripts.load()["get_many"].source)  # the read's script only

    store = Store(redis_client, StoreConfig())
    store.connect("c1", "u1", now=T)
    flushed()
    p = store.planned
    _, me = store.gather(p.set_status("u1", emoji="🎧", now=T), p.get("u1", viewer="u1", now=T))
    assert me.emoji == "🎧"
    client = aredis.Redis.from_url(presence_redis_url)
    try:
        astore = AsyncStore(client, StoreConfig())
        flushed()
        p = astore.planned
        _, me = await astore.gather(
            p.set_status("u1", emoji="📅", now=T), p.get("u1", viewer="u1", now=T)
        )
        assert me.emoji == "📅"
    finally:
        await client.aclose()


async def test_a_status_change_answers_with_the_users_own_state_after_it(backend, request, make3):
    """``set_status_and_get`` is one script call: the transitions and the user's presence after
    the write as they see it themselves, the same as ``set_status`` then ``get`` (so the user's
    own sockets learn it without a second call, which a cluster client may run first). Two
    users go through the same changes, one each way, on the sync face and the async one."""
    import dataclasses

    import redis.asyncio as aredis
    from django.conf import settings

    client, shards = backend
    store = make3()
    if isinstance(client, redis.RedisCluster):
        aclient = aredis.RedisCluster.from_url(request.getfixturevalue("redis_cluster").url)
    else:
        aclient = aredis.Redis.from_url(settings.REDIS_URL)
    # the same process as the sync store: a write renews its own process's lease
    astore = AsyncStore(aclient, StoreConfig(shards=shards), process=store.plans.process)
    steps = [
        ({"state": "dnd", "message": "Deep work", "emoji": "🎧"}, T + 1),
        ({"message": "Lunch", "expires_in": 60, "team": "core"}, T + 2),
        ({"state": "invisible"}, T + 3),  # to themself: invisible, not offline
        ({"state": "auto", "message": ""}, T + 4),
        ({"message": "Gone", "emoji": "🌴"}, T + 500),  # past the lease: offline
    ]
    try:
        for face, (one, other) in (("sync", ("a1", "b1")), ("async", ("a2", "b2"))):
            for uid in (one, other):
                store.connect(f"c-{uid}", uid, now=T)
                store.join("room", f"c-{uid}", uid, now=T)
            for fields, now in steps:
                if face == "sync":
                    told, me = store.set_status_and_get(one, now=now, **fields)
                else:
                    told, me = await astore.set_status_and_get(one, now=now, **fields)
                expected = store.set_status(other, now=now, **fields)
                them = store.get(other, viewer=other, now=now)
                assert [(t.kind, t.room, t.state) for t in told] == [
                    (t.kind, t.room, t.state) for t in expected
                ]
                assert me == dataclasses.replace(them, user_id=one), (face, fields)
                assert me.meta == them.meta
            assert me.state == "offline" and me.last_seen == T  # their last heartbeat
        store.forget("a1", now=T + 600)  # erased: nothing written, the state read as it is
        told, me = store.set_status_and_get("a1", message="back", now=T + 601)
        assert told == [] and me.state == "offline" and me.message == ""
    finally:
        await aclient.aclose()


def test_a_page_reads_until_ends_of_its_connected_users_only(redis_client):
    """get_many asks K_UNTIL (a grace's or a long window's end) about the connected users of a
    page only: a page of HTTP-only users makes no ZMSCORE of K_UNTIL while it holds somebody
    (as a site's nearly always does), and a page with connected users still reads their ends."""
    store = Store(redis_client, StoreConfig())
    web = [f"w{i}" for i in range(20)]
    store.touch_many([(u, True) for u in web], now=T)
    store.connect("c1", "closed", now=T)
    store.disconnect("c1", "closed", now=T + 1)  # K_UNTIL holds them: their grace's end
    store.connect("c2", "sock", now=T)

    def zmscores() -> int:
        return redis_client.info("commandstats").get("cmdstat_zmscore", {}).get("calls", 0)

    before = zmscores()
    found = store.get_many(web, now=T + 2)
    assert zmscores() - before == 1  # the one index (their web scores, negated), no until
    assert all(p.state == "online" and p.last_active == T for p in found.values())
    late = T + 1 + StoreConfig().disconnect_grace + 1  # the grace over, the lease not
    before = zmscores()
    found = store.get_many([*web[:3], "closed", "sock"], now=late)
    assert zmscores() - before == 2  # the one index, and until for the two connected
    assert found["closed"].state == "offline" and found["sock"].state == "online"
    assert [found[u].state for u in web[:3]] == ["online"] * 3


def _copy(client, uid: str) -> str:
    """The copy of their seen score that a user's record carries ('' for none)."""
    raw = client.hget(KeySpace.records(Store(client, StoreConfig()).keys.tag_for_user(uid)), uid)
    return raw.decode().split("\x1f")[12] if raw is not None else ""


def _zmscores(client) -> int:
    return client.info("commandstats").get("cmdstat_zmscore", {}).get("calls", 0)


def test_a_status_users_fresh_copy_is_read_without_the_index(redis_client):
    """Records first: a record holder's record carries a copy of their seen score, and a page of
    holders whose copies are fresh (copy + LEASE_TTL >= now) is read with no ZMSCORE at all; a
    page of plain users still reads seen (one ZMSCORE). Their states are the same either way."""
    store = Store(redis_client, StoreConfig())
    status = [f"s{i}" for i in range(10)]
    plain = [f"p{i}" for i in range(10)]
    for uid in status + plain:
        store.connect(f"c-{uid}", uid, now=T)
    for uid in status:
        store.set_status(uid, "dnd" if uid == "s0" else "auto", message="brb", now=T)
    tag = store.keys.tag_for_user("s1")
    assert float(_copy(redis_client, "s1")) <= redis_client.zscore(KeySpace.seen(tag), "s1")
    assert _copy(redis_client, "p1") == ""  # a plain user has no record
    before = _zmscores(redis_client)
    found = store.get_many(status, now=T + 10)
    assert _zmscores(redis_client) - before == 0
    assert [found[u].state for u in status] == ["dnd"] + ["online"] * 9
    assert all(found[u].message == "brb" for u in status)
    before = _zmscores(redis_client)
    found = store.get_many(plain, now=T + 10)
    assert _zmscores(redis_client) - before == 1
    assert all(p.state == "online" for p in found.values())
    # pages of both: the ids with no fresh copy looked up (most of the page fresh), or the
    # whole page (few fresh: a mixed page), the same answers either way
    for page in (status[:4] + plain[:2] + status[4:] + plain[2:5], plain[:6] + status[:2]):
        before = _zmscores(redis_client)
        found = store.get_many(page, now=T + 10)
        assert _zmscores(redis_client) - before == 1
        assert [found[u].state for u in page] == ["dnd" if u == "s0" else "online" for u in page]
        assert [found[u].message for u in page] == ["brb" if u in status else "" for u in page]


def test_a_stale_copy_does_not_make_a_user_look_online(redis_client):
    """A copy counts only while it is fresh (copy + LEASE_TTL >= now): past that the user is read
    through seen, whose score alone says. A status user whose beats stopped is offline once their
    lease has run out, before the sweep; one whose beats go on, with a copy the sweep has not
    renewed, is online (read through seen)."""
    store = Store(redis_client, StoreConfig())
    for conn, uid in (("c1", "quiet"), ("c2", "beating")):
        store.connect(conn, uid, now=T)
        store.set_status(uid, "dnd", message="focus", now=T)
    store.heartbeat_many([("c2", "beating")], now=T + 60)
    at = T + LEASE + 5  # both copies (T) stale; beating's score (T + 60) within the lease
    before = _zmscores(redis_client)
    found = store.get_many(["quiet", "beating"], now=at)
    assert _zmscores(redis_client) - before == 1
    assert found["quiet"].state == "offline" and found["quiet"].last_seen == T
    assert found["beating"].state == "dnd" and found["beating"].message == "focus"


def test_the_sweep_renews_the_copies_and_keeps_a_connected_status_user_online(redis_client):
    """The heartbeat writes seen alone; the sweep renews the copies due (K_COPIES, half a lease
    after the score they copy) from seen, so that a connected status user who beats is read from
    their copy, online, past the lease of their first copy. A user who leaves seen (invisible,
    an ended grace, an erasure) leaves with their copy."""
    store = Store(redis_client, StoreConfig())
    tag = store.keys.tag_for_user("u")
    copies = KeySpace.copies(tag)
    store.connect("c1", "u", now=T)
    store.set_status("u", "dnd", now=T)
    assert redis_client.zscore(copies, "u") == T + LEASE / 2
    store.heartbeat_many([("c1", "u")], now=T + 40)
    store.sweep(now=T + 40)  # not due yet
    assert float(_copy(redis_client, "u")) < T
    store.heartbeat_many([("c1", "u")], now=T + 50)
    store.sweep(now=T + 50)
    assert T + 50 - 1e-5 < float(_copy(redis_client, "u")) <= T + 50
    assert redis_client.zscore(copies, "u") == T + 50 + LEASE / 2
    store.heartbeat_many([("c1", "u")], now=T + 80)
    before = _zmscores(redis_client)
    assert store.get("u", now=T + 120).state == "dnd"  # past T + LEASE: the renewed copy
    assert _zmscores(redis_client) - before == 0
    # a score that no longer moves is looked at again half a lease later, not at every sweep
    store.sweep(now=T + 100)
    assert redis_client.zscore(copies, "u") == T + 80 + LEASE / 2
    store.sweep(now=T + 130)
    assert redis_client.zscore(copies, "u") == T + 130 + LEASE / 2
    assert store.get("u", now=T + 171).state == "offline"  # T + 80 + LEASE: the lease ran out
    # leaving seen takes the copy
    store.set_status("u", "invisible", now=T + 131)
    assert _copy(redis_client, "u") == "" and redis_client.zscore(copies, "u") is None
    store.set_status("u", "dnd", now=T + 132)
    assert _copy(redis_client, "u") != "" and redis_client.zscore(copies, "u") is not None
    store.disconnect("c1", "u", now=T + 133)
    assert store.get("u", now=T + 134).state == "dnd"  # in the grace (an end in K_UNTIL)
    before = _zmscores(redis_client)
    assert store.get("u", now=T + 133 + GRACE + 1).state == "offline"  # the grace over
    assert _zmscores(redis_client) - before == 2  # until, then seen for the "0"'s score
    assert kinds(store.sweep(now=T + 133 + GRACE + 1)) == [("offline", "u")]
    assert _copy(redis_client, "u") == "" and redis_client.zcard(copies) == 0
    store.connect("c2", "u", now=T + 200)
    assert redis_client.zscore(copies, "u") is not None
    store.forget("u", now=T + 201)
    assert redis_client.zcard(copies) == 0


def test_a_fresh_copy_whose_index_entry_was_evicted_reads_without_an_error(redis_client):
    """A fresh copy with an end in until (a closed connection in its grace) sends the user's seen
    score, read after the loop: where seen lost them meanwhile (an eviction under a memory
    policy that allows it: W005), the copy stands in, rather than a script error failing the
    whole page."""
    store = Store(redis_client, StoreConfig())
    store.connect("c1", "u", now=T)
    store.set_status("u", "dnd", now=T)
    store.connect("c2", "v", now=T)
    store.disconnect("c1", "u", now=T + 1)  # an end in until: the grace
    before = store.get_many(["u", "v"], now=T + 2)
    assert before["u"].state == "dnd"  # in the grace
    redis_client.zrem(KeySpace.seen(store.keys.tag_for_user("u")), "u")  # evicted
    assert store.get_many(["u", "v"], now=T + 2) == before


# -- one index (issue 43): an HTTP-only user's web score in seen, negated ----------------------


def _seen(store, uid: str):
    return store.client.zscore(KeySpace.seen(store.keys.tag_for_user(uid)), uid)


def test_an_http_only_page_reads_one_index(redis_client):
    """A page of HTTP-only users is one ZMSCORE (the one index, no web set) and reads their
    window and last activity from the negated scores, a record holder's too; K_HIDDEN and
    K_LAST are asked only about the ids with no score at all."""
    store = Store(redis_client, StoreConfig())
    web = [f"w{i}" for i in range(10)]
    store.touch_many([(u, True) for u in web], now=T)
    store.touch("idle", activity=False, now=T)  # a record (their last activity), HTTP only
    store.set_status("hid", "invisible", now=T)
    store.touch("hid", now=T)  # K_HIDDEN holds somebody
    before = _zmscores(redis_client)
    found = store.get_many([*web, "idle"], now=T + 30)
    assert _zmscores(redis_client) - before == 1
    assert {p.state for p in found.values()} == {"online"}
    assert {p.last_active for p in found.values()} == {T}
    before = _zmscores(redis_client)
    found = store.get_many([*web, "never"], now=T + 61)  # past their window
    # seen; hidden for "never" alone (K_LAST is empty: not asked)
    assert _zmscores(redis_client) - before == 2
    assert {u: (p.state, p.last_seen) for u, p in found.items()} == {
        **dict.fromkeys(web, ("offline", T)),
        "never": ("offline", None),
    }


def test_an_http_only_user_connecting_and_leaving_moves_sign(make3):
    """Negative while HTTP only, positive while a connection holds them, negative again after
    their eviction and a request; invisible moves them out of seen and back, as before."""
    store = make3()
    store.touch("u1", now=T)
    assert _seen(store, "u1") == -T
    assert store.connect("c1", "u1", now=T + 5) == []  # online by HTTP already
    assert _seen(store, "u1") == T + 5
    store.heartbeat_many([("c1", "u1")], now=T + 6)
    assert _seen(store, "u1") == T + 6
    assert store.disconnect("c1", "u1", now=T + 7) == []
    assert _seen(store, "u1") == T + 7  # in their grace (K_UNTIL: the window, later)
    assert store.get("u1", now=T + 7 + GRACE + 1).state == "online"  # the window holds them
    assert kinds(store.sweep(now=T + 60 + 1)) == [("offline", "u1")]
    assert _seen(store, "u1") is None
    assert kinds(store.touch("u1", now=T + 100)) == [("online", "u1")]
    assert _seen(store, "u1") == -(T + 100)
    p = store.get("u1", now=T + 101)
    assert (p.state, p.last_active) == ("online", T + 100)
    store.set_status("u1", "invisible", now=T + 102)  # hidden, their window as their end
    assert _seen(store, "u1") is None
    assert store.get("u1", viewer="u1", now=T + 120).state == "invisible"
    assert store.get("u1", viewer="u1", now=T + 161).state == "offline"
    # visible again within the window: listed in seen by that score, the window their end in
    # K_UNTIL (as before one index), then ended by the sweep
    store.set_status("u1", "auto", now=T + 130)
    assert _seen(store, "u1") == T + 100
    assert store.get("u1", now=T + 131).state == "online"
    assert kinds(store.sweep(now=T + 161)) == [("offline", "u1")]
    store.touch("u1", now=T + 200)
    store.set_status("u1", "dnd", now=T + 201)  # a record; still HTTP only
    assert _seen(store, "u1") == -(T + 200)
    p = store.get("u1", now=T + 202)
    assert (p.state, p.last_active) == ("dnd", T + 200)


def test_the_sweep_never_reaps_an_http_only_user_as_an_expired_lease(make3):
    """Every negative score is below NOW - LEASE_TTL: the lease pass reads K_SEEN from past 0,
    and HTTP-only users go only once their window has passed, with their web score as their
    last seen."""
    store = make3(online_window=300)
    store.touch("web", now=T)
    store.connect("c1", "sock", now=T)
    assert kinds(store.sweep(now=T + LEASE + 1)) == [("offline", "sock")]
    assert _seen(store, "web") == -T
    assert store.get("web", now=T + LEASE + 1).state == "online"
    assert store.online(now=T + LEASE + 1) == ["web"] and store.online_count(now=T + LEASE + 1) == 1
    gone = store.sweep(now=T + 300 + 1)
    assert kinds(gone) == [("offline", "web")] and gone[0].at == T
    p = store.get("web", now=T + 400)
    assert (p.state, p.last_seen) == ("offline", T)
    assert store.sweep(now=T + 400) == []


def test_a_beat_of_an_ended_connection_leaves_an_http_only_user_http_only(make3):
    """A silent connection swept, its user's request since (HTTP only now, a negative score):
    the connection's late heartbeat is missing, as before one index, and does not make them
    connected (ZADD GT would: the heartbeat counts K_SEEN's negative scores around its write)."""
    store = make3()
    store.connect("c1", "u1", now=T)
    store.connect("c2", "u2", now=T)
    store.heartbeat_many([("c2", "u2")], now=T + 80)
    assert kinds(store.sweep(now=T + LEASE + 1)) == [("offline", "u1")]
    store.touch("u1", now=T + LEASE + 2)
    assert _seen(store, "u1") == -(T + LEASE + 2)
    missing = store.heartbeat_many([("c1", "u1"), ("c2", "u2")], now=T + LEASE + 3)
    assert missing == [("c1", "u1")]
    assert _seen(store, "u1") < 0 and _seen(store, "u2") == T + LEASE + 3
    p = store.get("u1", now=T + LEASE + 4)
    assert p.state == "online" and p.last_active is not None
    assert store.connect("c3", "u1", now=T + LEASE + 4) == []  # its owner connects again
    assert _seen(store, "u1") == T + LEASE + 4


def test_http_only_listings_order_ties_by_id_descending(make3):
    """The HTTP-only part of seen is listed most recent first with equal scores by id
    descending, as the other indexes, so that the merge and a position's page agree."""
    store = make3()
    web = [f"w{i}" for i in range(7)]
    store.touch_many([(u, True) for u in web], now=T)  # one clock for all: equal scores
    store.touch("late", now=T + 1)
    for u in ("s1", "s2", "s3"):
        store.connect(f"c-{u}", u, now=T)
    order = store.online(now=T + 2)
    assert order == ["late", *sorted([*web, "s1", "s2", "s3"], reverse=True)]
    assert store.online(window=5, now=T + 2) == order
    paged, after = [], None
    while True:
        page = store.plans.online(None, 0, 3, False, T + 2, after=after, scores=True)
        got = store.run(page)
        if not got:
            break
        paged += [u for u, _ in got]
        after = (got[-1][1], got[-1][0])
    assert paged == order
    assert store.state_counts(100, now=T + 2).online == len(order)


def test_an_http_only_users_web_score_reads_back_exactly(make3):
    """A page's web scores go scaled by 2^22 as whole numbers (exact from 2^30 s on), or each
    as text where one is not whole (here a clock of 1,000 s): either way the very double."""
    store = make3()
    at = [T + 0.123457, T + 1 / 3, T + 7.000001]
    for n, t in enumerate(at):
        store.touch(f"w{n}", now=t)
    found = store.get_many([f"w{n}" for n in range(3)], now=T + 10)
    assert [found[f"w{n}"].last_active for n in range(3)] == at
    store.touch("early", now=1000.1)
    store.touch("early2", now=1000.3)
    found = store.get_many(["early", "early2"], now=1001.0)
    assert [(p.state, p.last_active) for p in found.values()] == [
        ("online", 1000.1),
        ("online", 1000.3),
    ]


def test_a_join_already_in_its_room_answers_early_only_with_nothing_to_change(make3):
    """join.lua answers a join already in its room before the library's definitions only when
    the full path would write nothing: a dead connection in the record (a killed process's, an
    ended grace's) or a past window sends it down the full path, which drops them and leaves
    the rooms only they held."""
    a, b = make3(), make3()
    a.connect("c1", "u1", now=T)
    a.join("r", "c1", "u1", now=T)
    b.connect("c2", "u1", now=T)
    b.join("s", "c2", "u1", now=T)
    assert a.join("r", "c1", "u1", now=T + 1) == []  # nothing to change: the early answer
    b.client.zrem(KeySpace.procs(b.keys.tag_for_user("u1")), b.plans.process)  # b is killed
    assert [(t.kind, t.room) for t in a.join("r", "c1", "u1", now=T + 2)] == [("leave", "s")]
    assert a.room_members("s", now=T + 2) == [] and a.room_members("r", now=T + 2) == ["u1"]

    a.connect("c3", "u2", now=T)
    a.join("r", "c3", "u2", now=T)
    a.connect("c4", "u2", now=T)
    a.join("t", "c4", "u2", now=T)
    a.disconnect("c4", "u2", now=T + 1)  # closing, its room held through the grace
    assert a.join("r", "c3", "u2", now=T + 2) == []
    assert a.room_members("t", now=T + 2) == ["u2"]
    late = T + 1 + GRACE + 1  # the grace over: the join drops it, and its room
    assert [(t.kind, t.room) for t in a.join("r", "c3", "u2", now=late)] == [("leave", "t")]
    assert a.room_members("t", now=late) == []


def _dump(client, prefix: str) -> dict:
    """Every key of a store's prefix, its name without the prefix, with its content."""
    out = {}
    for k in keys_of(client):
        if not k.startswith("{" + prefix + ":"):
            continue
        kind = client.type(k).decode()
        if kind == "hash":
            v = sorted(client.hgetall(k).items())
        elif kind == "zset":
            v = client.zrange(k, 0, -1, withscores=True)
        elif kind == "set":
            v = sorted(client.smembers(k))
        else:
            v = client.get(k)
        out[k.removeprefix("{" + prefix)] = v
    return out


@pytest.mark.parametrize("window", [None, 400.0])
def test_touch_and_set_status_answer_early_only_as_the_full_path_would(
    backend, monkeypatch, window
):
    """touch.lua and set_status.lua answer their common case before the rest of the library's
    definitions (issue 43): side by side, one store's calls with the early parts and another's
    (its own prefix, the same processes) with the full path alone (scripts.load("full")) leave
    the same keys and announce the same transitions, in every case below; the early part
    answers (scripts.load("early"): the full path an error) for a connected visible user with
    a live connection (their record's, or their registry field's), a grace running, a K_UNTIL
    end, and for a set_status that stays visible; the full path does an erased user's
    set_status, an invisible user's, a dead process's connection, an ended grace's
    set_status, an idle user's activity and a set_status read back."""
    from presence_app.store import scripts

    client, shards = backend
    extra = {"idle_after": 5, **({"online_window": window} if window else {})}

    def pair(process):
        return tuple(
            Store(client, StoreConfig(shards=shards, prefix=p, **extra), process=process)
            for p in ("early", "full")
        )

    a, b = pair("p1")
    oa, ob = pair("p2")  # another process
    load = scripts.load

    def both(fn, expect=None):
        """fn on each side; expect: "early", "full" (which path answers on the early side)."""
        if expect == "full":  # first the early side with the full path an error: it errs
            # (before any write: an early part writes only once it answers)
            monkeypatch.setattr(scripts, "load", lambda: load("early"))
            try:
                with pytest.raises(Exception, match="the full path"):
                    fn(a, oa)
            finally:
                monkeypatch.setattr(scripts, "load", load)
        got = []
        for store, path in ((a, "early" if expect == "early" else "both"), (b, "full")):
            monkeypatch.setattr(scripts, "load", lambda path=path: load(path))
            try:
                got.append(repr(fn(store, oa if store is a else ob)))
            finally:
                monkeypatch.setattr(scripts, "load", load)
        assert got[0] == got[1]
        assert _dump(client, "early") == _dump(client, "full")

    both(lambda s, o: s.connect("c1", "u1", now=T))  # u1: a field, no record
    both(lambda s, o: s.touch("u1", now=T + 1), "early")
    both(lambda s, o: s.touch("u1", False, now=T + 2), "early")
    both(lambda s, o: s.connect("c2", "u2", now=T))  # u2: a field and a record
    both(lambda s, o: s.set_status("u2", message="hi", now=T + 1), "early")
    both(lambda s, o: s.touch("u2", now=T + 2), "early")
    both(lambda s, o: s.set_status("u2", state="dnd", now=T + 3), "early")
    both(lambda s, o: s.set_status("u2", state="auto", message="", now=T + 4), "early")
    both(lambda s, o: (s.connect("c3", "u3", now=T), s.join("r", "c3", "u3", now=T)))
    both(lambda s, o: s.touch("u3", now=T + 1), "early")  # u3: the record holds c3
    both(lambda s, o: s.set_status("u3", message="m", expires_in=5, now=T + 2), "early")
    both(lambda s, o: s.set_status("u3", emoji="x", now=T + 9), "early")  # the message past
    both(lambda s, o: s.set_status_and_get("u3", message="n", now=T + 10), "full")
    both(lambda s, o: s.idle("u3", now=T + 11))
    both(lambda s, o: s.touch("u3", False, now=T + 12), "early")  # no activity: nothing shown
    both(lambda s, o: s.touch("u3", now=T + 13), "full")  # an idle user's activity: an update
    # invisible: K_HIDDEN, never a leak
    both(lambda s, o: (s.connect("c4", "u4", now=T), s.set_status("u4", "invisible", now=T)))
    both(lambda s, o: s.touch("u4", now=T + 1), "full")
    both(lambda s, o: s.set_status("u4", message="quiet", now=T + 2), "full")
    both(lambda s, o: s.set_status("u4", "auto", now=T + 3), "full")
    # erased: nothing written
    both(lambda s, o: (s.connect("c5", "u5", now=T), s.forget("u5", now=T + 1)))
    both(lambda s, o: s.touch("u5", now=T + 2), "early")
    both(lambda s, o: s.set_status("u5", message="late", now=T + 3), "full")
    # a dead process's connection (field, record)
    both(lambda s, o: (o.connect("c6", "u6", now=T), o.connect("c7", "u7", now=T)))
    both(lambda s, o: o.join("r", "c7", "u7", now=T))
    both(lambda s, o: s.client.zrem(KeySpace.procs(s.keys.tag_for_user("u6")), "p2"))
    both(lambda s, o: s.client.zrem(KeySpace.procs(s.keys.tag_for_user("u7")), "p2"))
    both(lambda s, o: s.touch("u6", now=T + 1), "full")
    both(lambda s, o: s.set_status("u7", message="m", now=T + 2), "full")
    both(lambda s, o: s.touch("u7", now=T + 3), "full")
    # a grace running, then over (another connection live)
    both(lambda s, o: [s.connect(c, "u8", now=T) for c in ("c8", "c9")])
    both(lambda s, o: (s.join("r", "c8", "u8", now=T), s.join("s", "c9", "u8", now=T)))
    both(lambda s, o: s.disconnect("c9", "u8", now=T + 1))
    both(lambda s, o: s.touch("u8", now=T + 2), "early")
    both(lambda s, o: s.set_status("u8", message="g", now=T + 3), "early")
    late = T + 1 + GRACE + 1
    both(lambda s, o: s.touch("u8", now=late), "early")
    both(lambda s, o: s.set_status("u8", message="h", now=late + 1), "full")
    # the last connection closed: a grace and a K_UNTIL end
    both(lambda s, o: s.disconnect("c1", "u1", now=T + 5))
    both(lambda s, o: s.touch("u1", now=T + 6), "full")
    both(lambda s, o: s.disconnect("c3", "u3", now=T + 20))
    both(lambda s, o: s.touch("u3", now=T + 21), "early")
    both(lambda s, o: s.set_status("u3", message="bye", now=T + 22), "early")
    # a batch: the early part's users, then the full path's from the first it does not take
    both(lambda s, o: s.touch_many([("u2", True), ("u4", True), ("u8", False)], now=late + 2))
    both(lambda s, o: s.touch_many([("u2", False), ("u8", True), ("u9", True)], now=late + 3))
    both(lambda s, o: s.sweep_round(now=late + LEASE * 3))
    both(lambda s, o: s.touch("u2", now=late + LEASE * 3 + 1))
    both(lambda s, o: s.set_status("u8", message="again", now=late + LEASE * 3 + 2))
