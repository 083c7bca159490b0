"""Many threads changing the same users and rooms at once end in the state the semantics say."""

import random
import threading

from ..conftest import all_keys

T = 1_800_000_000.0
USERS = [str(u) for u in range(8)]
ROOMS = ["a", "b", "c"]


def worker(store, seed: int, record: dict, barrier: threading.Barrier) -> None:
    """One thread = a few sockets of random users, each doing random things in random order.
    The client is shared: redis-py gives each thread its own pooled connection."""
    rng = random.Random(seed)
    conns = {f"t{seed}-{i}": rng.choice(USERS) for i in range(4)}
    state = {cid: {"open": False, "rooms": set()} for cid in conns}
    barrier.wait()
    for step in range(300):
        cid = rng.choice(list(conns))
        uid, s = conns[cid], state[cid]
        now = T + step * 0.01
        op = rng.random()
        if not s["open"]:
            # A new socket of the same user: connection ids are never reused.
            del conns[cid], state[cid]
            cid = f"t{seed}-{step}-new"
            conns[cid], state[cid] = uid, {"open": True, "rooms": set()}
            store.connect(cid, uid, now=now)
        elif op < 0.35:
            room = rng.choice(ROOMS)
            store.join(room, cid, uid, now=now)
            s["rooms"].add(room)
        elif op < 0.6:
            room = rng.choice(ROOMS)
            store.leave(room, cid, uid, now=now)
            s["rooms"].discard(room)
        elif op < 0.8:
            store.heartbeat_many([(cid, uid)], now=now)
        elif op < 0.9:
            store.set_status(uid, rng.choice(["auto", "dnd"]), now=now)
        else:
            store.disconnect(cid, uid, now=now)
            s["open"], s["rooms"] = False, set()
    record[seed] = (conns, state)


def test_concurrent_changes_end_in_the_semantic_state(store):
    record: dict = {}
    barrier = threading.Barrier(6)
    threads = [
        threading.Thread(target=worker, args=(store, seed, record, barrier)) for seed in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(record) == 6

    # Ground truth: a user is online while one of their sockets is open; in a room while one of
    # their open sockets joined it. Closed sockets are gone once the grace has passed.
    online, members = set(), {room: set() for room in ROOMS}
    for conns, state in record.values():
        for cid, uid in conns.items():
            if state[cid]["open"]:
                online.add(uid)
                for room in state[cid]["rooms"]:
                    members[room].add(uid)
    after_grace = T + 3 + 21
    swept = store.sweep(now=after_grace)
    assert set(store.online(now=after_grace)) == online
    assert store.online_count(now=after_grace) == len(online)
    for room in ROOMS:
        assert set(store.room_members(room, now=after_grace)) == members[room]
    assert dict(store.rooms()) == {r: len(m) for r, m in members.items() if m}
    assert {t.user_id for t in swept if t.kind == "offline"}.isdisjoint(online)

    # And when everything expires, nothing is left but profile data: the records (a status, no
    # connection), the offline users' last seens, the process's lease and the cleaner's place;
    # no listing, registry field, process set or room.
    store.sweep(now=T + 1000)
    assert store.online_count(now=T + 1000) == 0
    assert store.rooms() == []
    left = {key.rpartition(":")[2] for key in all_keys(store.client)}
    assert left <= {"recs", "rexp", "last", "procs", "clean"}, left
    for user in USERS:
        assert store.export(user)["connections"] == [], user
