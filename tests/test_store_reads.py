"""Store reads added for the Django side: state counts, rooms of many users, gather()."""

import pytest

from presence_app.store import StateCounts

T = 1_800_000_000.0


def test_state_counts_by_public_state(store):
    store.touch(1, now=T)  # online
    store.connect("c2", 2, now=T - 400)  # idle: no activity since
    store.heartbeat("c2", 2, now=T - 10)
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


def test_a_read_presence_is_what_its_fields_say_whatever_is_read_first(store):
    """get_many's presences parse their meta when it is first read (types.Presence): in
    whatever order their fields are read, compared, printed, pickled or copied, each is the
    presence built with those fields."""
    import copy
    import dataclasses
    import pickle

    from presence_app.store import Presence

    store.connect("a", 1, now=T)  # online
    store.connect("b", 2, now=T - 400)  # idle: no activity since
    store.heartbeat("b", 2, now=T - 10)
    store.touch(3, now=T)
    store.set_status(3, "dnd", message="focus", emoji="🎧", device="desk", now=T)
    store.touch(4, now=T)
    store.set_status(4, "invisible", message="hidden", team="x", now=T)
    store.touch(5, now=T)
    store.set_status(5, message="lunch", emoji="🍜", expires_in=10, k=[1], now=T)
    store.touch(6, now=T - 100)  # window over, not swept
    ids = [1, 2, 3, 4, 5, 6, 7]
    expected = {
        "1": Presence("1", "online", T + 20, T),
        "2": Presence("2", "idle", T + 20, T - 400),
        "3": Presence("3", "dnd", T + 20, T, "focus", "🎧", "desk"),
        "4": Presence("4", "offline", T, None, meta={"team": "x"}),  # their last visible moment
        "5": Presence("5", "online", T + 20, T, "", "", "", {"k": [1]}),  # message expired
        "6": Presence("6", "offline", T - 100, T - 100),
        "7": Presence("7"),
    }
    names = [f.name for f in dataclasses.fields(Presence)]
    for order in (names, names[::-1], ["meta", "message", "state"]):
        found = store.get_many(ids, viewer=1, now=T + 20)
        for uid, p in found.items():
            for name in order:
                assert getattr(p, name) == getattr(expected[uid], name), (uid, name)
            assert p == expected[uid] and repr(p) == repr(expected[uid])
    # untouched presences: compared, printed, pickled, copied, replaced, hashed as built ones
    found = store.get_many(ids, viewer=1, now=T + 20)
    assert found == expected
    found = store.get_many(ids, viewer=1, now=T + 20)
    assert {u: p.as_dict() for u, p in found.items()} == {
        u: p.as_dict() for u, p in expected.items()
    }
    for uid, p in store.get_many(ids, viewer=1, now=T + 20).items():
        assert pickle.loads(pickle.dumps(p)) == expected[uid]
        assert copy.copy(p) == copy.deepcopy(p) == expected[uid]
        assert dataclasses.asdict(p) == dataclasses.asdict(expected[uid])
        assert dataclasses.replace(p, message="x") == dataclasses.replace(
            expected[uid], message="x"
        )
        assert (
            p.last_seen_at == expected[uid].last_seen_at and p.is_online == expected[uid].is_online
        )
        with pytest.raises(TypeError):  # a dict field: unhashable, as ever
            hash(p)
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.state = "online"
    # as the invisible user themself, and revealed: their own state
    assert store.get(4, viewer=4, now=T + 20).state == "invisible"
    assert store.get(4, reveal_all=True, now=T + 20).message == "hidden"
    assert Presence.state == "offline" and Presence("9").meta == {}  # the class' defaults
