"""Store reads added for the Django side: state counts, rooms of many users, gather()."""

from presence_app.store import StateCounts

T = 1_800_000_000.0


def test_state_counts_by_public_state(store):
    store.touch(1, now=T)  # online
    store.connect("c2", 2, now=T - 400)
    store.heartbeat("c2", 2, now=T - 10)
    store.idle(2, now=T - 10)  # its process saw no activity for IDLE_AFTER
    store.touch(3, now=T)
    store.set_status(3, "dnd", now=T)  # dnd
    store.touch(4, now=T)
    store.set_status(4, "invisible", now=T)  # invisible: only counted apart
    store.touch(5, now=T - 100)  # window over: not counted
    counts = store.state_counts(now=T + 1)
    assert counts == StateCounts(online=1, idle=1, dnd=1, invisible=1, total=3, counted=3)
    assert counts.exact


def test_state_counts_read_states_of_the_most_recent_users_only(store):
    for uid in range(10):
        store.touch(uid, now=T + uid)
    counts = store.state_counts(limit=1, now=T + 10)  # the limit holds per shard
    assert counts.total == 10 and not counts.exact
    assert counts.counted == counts.online == store.config.shards


def test_user_rooms_many_and_gather_in_one_round_trip(store):
    store.connect("a", 1, now=T)
    store.join("lobby", "a", 1, now=T)
    store.join("design", "a", 1, now=T)
    store.connect("b", 2, now=T)
    assert store.user_rooms_many([1, 2, 3]) == {"1": ["design", "lobby"], "2": [], "3": []}
    plan = store.planned
    rooms, count, presences = store.gather(
        plan.user_rooms_many([1]), plan.online_count(now=T), plan.get_many([1, 2], now=T)
    )
    assert rooms == {"1": ["design", "lobby"]} and count == 2
    assert [p.state for p in presences.values()] == ["online", "online"]
    assert store.gather() == []


def test_one_read_of_every_kind_of_user_reads_each_as_alone(store):
    """A page mixes every kind of user; get_many codes each (connected, connected with a record,
    HTTP-only within their window with none, and the rest) and sends each code's own fields, so
    one read of all of them in any order is each one's read alone."""
    store.connect("c1", "sock", now=T)  # connected, no record
    store.connect("c2", "stat", now=T)
    store.set_status("stat", message="Lunch", emoji="🍔", now=T)  # connected, a record
    store.touch("web", now=T - 10)  # HTTP only, within the window, no record
    store.touch("webmsg", now=T - 5)
    store.set_status("webmsg", message="Travelling", now=T - 5)  # HTTP only, a record
    store.touch("webidle", activity=False, now=T - 20)  # HTTP only, a record (last activity)
    store.touch("gone", now=T - 200)  # HTTP only, the window over, not swept yet
    store.touch("swept", now=T - 500)
    store.sweep(now=T - 400)  # their last seen in K_LAST
    store.touch("hid", now=T - 3)
    store.set_status("hid", "invisible", now=T - 3)  # HTTP only and invisible
    store.connect("c3", "dnd", now=T)
    store.set_status("dnd", "dnd", now=T)
    store.connect("c4", "closed", now=T - 50)
    store.disconnect("c4", "closed", now=T - 40)  # in K_UNTIL, its grace over
    ids = ["web", "sock", "never", "gone", "stat", "hid", "swept", "webmsg", "dnd", "webidle"]
    ids += ["closed"]
    now = T + 1
    for viewer in (None, "hid"):
        alone = {uid: store.get_many([uid], viewer=viewer, now=now)[uid] for uid in ids}
        for order in (ids, ids[::-1], ids[3:] + ids[:3]):
            assert store.get_many(order, viewer=viewer, now=now) == {u: alone[u] for u in order}
    found = store.get_many(ids, now=now)
    assert {u for u, p in found.items() if p.is_online} == {
        "web",
        "sock",
        "stat",
        "webmsg",
        "dnd",
        "webidle",
    }
    assert (found["web"].last_active, found["web"].last_seen) == (T - 10, now)
    assert (found["webmsg"].message, found["webmsg"].last_active) == ("Travelling", T - 5)
    assert (found["stat"].message, found["stat"].emoji) == ("Lunch", "🍔")
    assert found["gone"].last_seen == T - 200 and found["swept"].last_seen == T - 500
    assert found["never"].last_seen is None and found["dnd"].state == "dnd"
    assert found["closed"].state == "offline"
    assert found["hid"].state == "offline"  # to others
    assert store.get_many(ids, viewer="hid", now=now)["hid"].state == "invisible"
