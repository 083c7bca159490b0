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
