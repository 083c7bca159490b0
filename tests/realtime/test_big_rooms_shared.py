"""A join storm's snapshots shared (issue 44): the joiners of one tick in a process share one read
of the room and one encoding per class of viewers (``feeds.Joiners``), over real sockets, the
real channels-redis layer and a real Redis. A storm converges with no lost or duplicated member;
viewers the one rule shows differently get their own snapshots, however they share the read;
an invisible user on several devices is in nobody's snapshot but their own devices'."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.layers import channel_layers

from presence_app import presence
from presence_app.realtime import roomstate
from presence_app.realtime.feeds import get_feeds

from ..timing import limit
from ..ws import Socket, make_user, presence_settings, shutdown
from .test_big_rooms import Roster

pytestmark = pytest.mark.django_db(transaction=True)

#: Who may see whom under this module's policy (viewer id -> ids); absent: everybody.
RELATION: dict[str, set[str]] = {}


def audience(viewer: Any, user_ids: list[str]) -> list[str]:
    if viewer not in RELATION:
        return list(user_ids)
    return [u for u in user_ids if u in RELATION[viewer]]


POLICY = "tests.realtime.test_big_rooms_shared.audience"


@pytest.fixture
async def layer(redis_client):
    channel_layers.backends.clear()
    RELATION.clear()
    yield
    await shutdown()
    channel_layers.backends.clear()
    RELATION.clear()


async def opened(cookie: str, name: str, *, diffs: bool = True) -> Socket:
    sock = await Socket.open(cookie, name=name)
    sock.beat()
    if diffs:
        await sock.send(type="hello", accept=["presence.diff"])
    return sock


async def snapshot(sock: Socket, room: str) -> list[dict[str, Any]]:
    """Every page of ``sock``'s snapshot of ``room``, in order."""
    pages = [await sock.wait_for("presence.state", room=room, timeout=limit(20))]
    while pages[-1]["more"]:
        pages.append(await sock.wait_for("presence.state", room=room, timeout=limit(20)))
    assert [p["page"] for p in pages] == list(range(len(pages)))
    return pages


def listed(pages: list[dict[str, Any]]) -> list[str]:
    return [m["user"] for p in pages for m in p["members"]]


def whole(pages: list[dict[str, Any]]) -> dict[str, Any]:
    """A paged snapshot as one: what :class:`Roster` starts from."""
    return {"members": [m for p in pages for m in p["members"]]}


def users_in(value: Any) -> set[str]:
    """Every user id a frame names, at any depth."""
    if isinstance(value, dict):
        found = {str(value["user"])} if "user" in value else set()
        return found.union(*(users_in(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(users_in(v) for v in value))
    return set()


def the_feed(room: str) -> Any:
    return next(f for (_, r), f in get_feeds().feeds.items() if r == room)


async def truth(room: str) -> set[str]:
    return set(await presence.aroom_members(room, viewer=presence.TRUSTED))


async def a_used_slot(first: Socket, watcher: Socket) -> None:
    """At the start of a membership slot, a change whose diff goes out at once (the slot's
    first), seen by ``watcher``: the room's next changes wait for the next slot, and no frame
    of the room goes out meanwhile (the slots are the wall clock's, 4 s long here; what follows
    takes a fraction of one)."""
    _, into, t = roomstate._slot()
    await asyncio.sleep(t - into + 0.05)
    await first.send(type="status", message="slot")
    deadline = asyncio.get_running_loop().time() + limit(5)
    while True:
        left = deadline - asyncio.get_running_loop().time()
        assert left > 0, "the slot's first change never went out"
        frame = await watcher.wait_for("presence.diff", timeout=left)
        if any(m.get("message") == "slot" for m in frame.get("updated", ())):
            return


N = 40


async def test_a_storm_shares_its_reads_and_every_roster_converges(layer):
    """N sockets join at once: far fewer reads of the room than joins; each joiner's snapshot
    lists nobody twice and, with the diffs after it, becomes the room; the watchers hear each
    join once."""
    with presence_settings(MEMBERSHIP_RATE=2, ROOM_SNAPSHOT_PAGE=7, ROOM_SNAPSHOT_BYTES=1024):
        watchers = [await make_user(f"w{n}") for n in range(3)]
        people = [await make_user(f"p{n}") for n in range(N)]
        ws = [await opened(c, u.username) for u, c in watchers]
        rosters = [Roster(w, "hall", whole(await snapshot(await_join(w), "hall"))) for w in ws]
        here = {w.user for w in ws}
        for r in rosters:
            await r.until(here, timeout=limit(5))
            r.frames.clear()
        socks = [await opened(c, u.username) for u, c in people]
        reads = the_feed("hall").joiners.reads
        await asyncio.gather(*(s.send(type="join", room="hall") for s in socks))
        everyone = here | {s.user for s in socks}
        joined = [Roster(s, "hall", whole(await snapshot(s, "hall"))) for s in socks]
        made = the_feed("hall").joiners.reads - reads
        assert made <= N / 4, made  # one read serves the joiners of a tick
        for r in joined:
            assert r.sock.user in r.members  # its own entry, though it joined after the read
        for r in joined + rosters:
            await r.until(everyone, timeout=limit(15))
        assert everyone == await truth("hall")
        for r in rosters:  # each join once to those who were there
            told = [m["user"] for f in r.frames if f["type"] == "presence.diff"
                    for m in f.get("joined", ())]  # fmt: skip
            assert sorted(told) == sorted(s.user for s in socks)
        print(f"{N} joins: {made} reads of the room")


def await_join(sock: Socket) -> Socket:
    asyncio.ensure_future(sock.send(type="join", room="hall"))
    return sock


async def test_two_classes_in_one_read_get_their_own_snapshots(layer):
    """Alice may see only herself and bob; bob sees everybody. They join in one slot and
    share one read of the room: alice's snapshot (and every frame she gets) names neither
    carol nor dave, bob's names both."""
    (_, ca), (_, cb), (_, cc), (_, cd), (_, ce) = [
        await make_user(n) for n in ("alice", "bob", "carol", "dave", "eve")
    ]
    with presence_settings(MEMBERSHIP_RATE=0.25, AUDIENCE=POLICY):
        a, b = await opened(ca, "alice"), await opened(cb, "bob")
        c, d, e = await opened(cc, "carol"), await opened(cd, "dave"), await opened(ce, "eve")
        RELATION[a.user] = {a.user, b.user}
        for s in (c, d, e):
            await s.send(type="join", room="hall")
        rosters = [Roster(s, "hall", whole(await snapshot(s, "hall"))) for s in (c, d, e)]
        for r in rosters:
            await r.until({c.user, d.user, e.user}, timeout=limit(10))
        feed = the_feed("hall")
        reads = feed.joiners.reads
        await a_used_slot(e, c)
        await asyncio.gather(a.send(type="join", room="hall"), b.send(type="join", room="hall"))
        pa, pb = await snapshot(a, "hall"), await snapshot(b, "hall")
        assert feed.joiners.reads - reads == 1  # one read for both
        assert len(feed.joiners.shared.classes) == 2  # two encodings: two classes
        assert set(listed(pa)) <= {a.user, b.user} and a.user in listed(pa)
        assert {b.user, c.user, d.user, e.user} <= set(listed(pb))
        seen_by_a = users_in(pa) | users_in(await a.collect(2 * roomstate.membership_tick()))
        assert not seen_by_a & {c.user, d.user, e.user}, seen_by_a
        assert b.user in users_in(pb) | users_in(await b.collect(0.5))


async def test_an_invisible_user_on_three_devices_is_in_no_other_snapshot(layer):
    """Eve is invisible and opens three devices; two of them and two other viewers (of two
    classes) join in one slot, sharing one read that shows eve to nobody (her first device is
    in the room: invisible). Eve's devices list her as invisible; nobody
    else's frame ever names her, nor does the room's state she sets."""
    (_, ca), (_, cb), (_, cc), (_, ce) = [
        await make_user(n) for n in ("alice", "bob", "carol", "eve")
    ]
    with presence_settings(MEMBERSHIP_RATE=0.25, AUDIENCE=POLICY):
        a, b, c = await opened(ca, "alice"), await opened(cb, "bob"), await opened(cc, "carol")
        devices = [await opened(ce, f"eve{n}") for n in range(3)]
        eve = devices[0].user
        RELATION[a.user] = {a.user, b.user, c.user, eve}  # alice's class is her own
        await devices[0].send(type="status", state="invisible")
        deadline = asyncio.get_running_loop().time() + limit(5)
        while (await presence.aget(eve, viewer=presence.TRUSTED)).state != "invisible":
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        await c.send(type="join", room="hall")
        await snapshot(c, "hall")
        await devices[0].send(type="join", room="hall")  # in the room before the read
        await snapshot(devices[0], "hall")
        feed = the_feed("hall")
        reads = feed.joiners.reads
        await a_used_slot(c, devices[0])
        await asyncio.gather(
            *(s.send(type="join", room="hall") for s in (a, b, *devices[1:]))
        )  # fmt: skip
        got = {s.name: await snapshot(s, "hall") for s in (a, b, *devices[1:])}
        # one read, eve online in it for nobody: her devices read their own entry
        assert feed.joiners.reads - reads == 1
        read = feed.joiners.shared.read.result()
        assert eve not in [u for u in read.ids if read.presences[u].is_online]
        for name, pages in got.items():
            states = {m["user"]: m["state"] for p in pages for m in p["members"]}
            if name.startswith("eve"):
                assert states[eve] == "invisible", pages  # herself, as she sees herself
                assert c.user in states
            else:
                assert eve not in states and c.user in states, (name, pages)
        await devices[1].send(type="roomstate", room="hall", data={"x": 1})
        await devices[2].send(type="status", message="still here")
        later = await a.collect(2 * roomstate.membership_tick())
        later += await b.collect(0) + await c.collect(0)
        for f in [*later, *got["alice"], *got["bob"]]:
            assert eve not in users_in(f), f


async def test_a_read_is_shared_for_a_slot_at_most(layer):
    """A change of the room that no frame tells (a connection put back after Redis restarted
    empty, another process's recovery: here a join written by the store alone) reaches a joiner
    who comes a slot after the last read, though no frame of the room went out since it."""
    from presence_app.core.connection import get_async_store

    with presence_settings(MEMBERSHIP_RATE=5):
        (_, ann_cookie), (bob, _), (_, cid_cookie) = [
            await make_user(name) for name in ("ann", "bob", "cid")
        ]
        ann = await opened(ann_cookie, "ann")
        await ann.send(type="join", room="hall")
        await snapshot(ann, "hall")
        joiners = the_feed("hall").joiners
        deadline = asyncio.get_running_loop().time() + limit(10)
        while joiners.sent == 0:  # her join's diff went out
            assert asyncio.get_running_loop().time() < deadline, "her join's diff never went out"
            await asyncio.sleep(0.05)
        # Her second tab joins: no join to tell (she is in the room), the room read, no frame.
        again = await opened(ann_cookie, "ann-2")
        await again.send(type="join", room="hall")
        await snapshot(again, "hall")
        reads = joiners.reads
        assert joiners.shared.stamp[0] == joiners.sent  # a read no frame has made stale
        store = get_async_store()  # bob is put in the room, and nothing is published
        await store.connect("silent-bob", str(bob.pk))
        await store.join("hall", "silent-bob", str(bob.pk))
        await asyncio.sleep(3 * roomstate.membership_tick())
        cid = await opened(cid_cookie, "cid")
        await cid.send(type="join", room="hall")
        assert str(bob.pk) in listed(await snapshot(cid, "hall"))
        assert joiners.reads == reads + 1


async def test_a_read_is_made_again_once_its_slot_is_over(layer):
    """The rule under the test above, without its timing: a read is shared within the slot it
    began in, and a joiner after that slot makes a new one, frames or none."""
    with presence_settings(MEMBERSHIP_RATE=5):
        _, cookie = await make_user("ann")
        ann = await opened(cookie, "ann")
        await ann.send(type="join", room="hall")
        await snapshot(ann, "hall")
        joiners = the_feed("hall").joiners
        first = joiners._read(True)
        assert joiners._read(True) is first  # no frame, within its slot: shared
        first.began -= joiners.slot() + 0.01  # its slot is over
        assert joiners._read(True) is not first
        await asyncio.gather(first.read, joiners.shared.read)
