"""Big rooms (issue 44) over real sockets, the real channels-redis layer and a real Redis:
membership changes batched per tick (``presence.diff``) for a client that accepts them, a storm
of joins and of leaves converging with no lost or duplicated member, and the one redaction
(invisible users, the ``AUDIENCE`` policy) holding in every diff."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from channels.layers import channel_layers

from presence_app import presence
from presence_app.realtime import roomstate

from ..timing import limit
from ..ws import Socket, make_user, presence_settings, shutdown

pytestmark = pytest.mark.django_db(transaction=True)

#: Who may see whom under the audience test's policy (viewer id -> ids).
RELATION: dict[str, set[str]] = {}


def audience(viewer, user_ids):
    return [u for u in user_ids if u in RELATION.get(viewer, set())]


@pytest.fixture
async def slow_ticks(redis_client):
    """Half-second ticks: a storm of joins spans a few of them whatever the machine's speed."""
    channel_layers.backends.clear()
    with presence_settings(MEMBERSHIP_RATE=2):
        yield roomstate.membership_tick()
        await shutdown()
    channel_layers.backends.clear()
    RELATION.clear()


async def open_socket(cookie: str, name: str, *, diffs: bool) -> Socket:
    sock = await Socket.open(cookie, name=name)
    sock.beat()
    if diffs:
        await sock.send(type="hello", accept=["presence.diff"])
    return sock


async def join(sock: Socket, room: str) -> dict[str, Any]:
    await sock.send(type="join", room=room)
    return await sock.wait_for("presence.state", room=room)


class Roster:
    """A room's members as a diff-accepting client keeps them: the snapshot, then each diff."""

    def __init__(self, sock: Socket, room: str, snapshot: dict[str, Any]) -> None:
        self.sock, self.room = sock, room
        self.members = {m["user"] for m in snapshot["members"]}
        self.frames: list[dict[str, Any]] = []  # every frame after the snapshot
        self.joined: list[str] = []
        self.left: list[str] = []

    async def until(self, wanted: set[str], timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.members != wanted:
            left = deadline - loop.time()
            assert left > 0, f"{self.sock.name}: {sorted(self.members)} != {sorted(wanted)}"
            try:
                frame = await self.sock.next(left)
            except TimeoutError:
                continue
            self.frames.append(frame)
            if frame["type"] == "presence.diff" and frame.get("room") == self.room:
                for m in frame["left"]:
                    self.members.discard(m["user"])
                    self.left.append(m["user"])
                for m in frame["joined"]:
                    self.members.add(m["user"])
                    self.joined.append(m["user"])

    def diffs(self) -> list[dict[str, Any]]:
        return [f for f in self.frames if f["type"] == "presence.diff" and f.get("room")]


def users_in(value: Any) -> set[str]:
    """Every user id a frame names, at any depth (members, states, events)."""
    if isinstance(value, dict):
        found = {str(value["user"])} if "user" in value else set()
        return found.union(*(users_in(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(users_in(v) for v in value))
    return set()


async def truth(room: str) -> set[str]:
    return set(await presence.aroom_members(room, viewer=presence.TRUSTED))


N = 30


async def test_a_storm_of_joins_and_leaves_reaches_a_watcher_as_few_frames(slow_ticks):
    tick = slow_ticks
    (_, cw), (_, cl) = await make_user("watcher"), await make_user("legacy")
    members = [await make_user(f"m{n}") for n in range(N)]
    w = await open_socket(cw, "watcher", diffs=True)
    legacy = await open_socket(cl, "legacy", diffs=False)  # today's frames, for comparison
    roster = Roster(w, "hall", await join(w, "hall"))
    await join(legacy, "hall")
    await roster.until({w.user, legacy.user}, timeout=limit(5))
    roster.frames.clear(), roster.joined.clear()
    socks = [await open_socket(c, u.username, diffs=False) for u, c in members]
    ids = {s.user for s in socks}

    started = time.monotonic()
    await asyncio.gather(*(s.send(type="join", room="hall") for s in socks))
    await roster.until({w.user, legacy.user} | ids, timeout=limit(10))
    took = time.monotonic() - started
    assert roster.members == await truth("hall")
    diffs = roster.diffs()
    # No member lost or told twice; at most one frame a tick, and far fewer frames than joins.
    assert sorted(roster.joined) == sorted(ids)
    assert len(diffs) <= took / tick + 2, (len(diffs), took)
    assert len(diffs) < N / 3, [len(d["joined"]) for d in diffs]
    assert {m["state"] for d in diffs for m in d["joined"]} == {"online"}
    # The same storm, one frame a join, to a socket that did not accept diffs.
    joins: list[dict[str, Any]] = []
    while len(joins) < N:
        joins.append(await legacy.wait_for("presence.join", room="hall", timeout=limit(5)))
    print(f"{N} joins in {took:.2f} s: {len(diffs)} diff frames (tick {tick} s), {N} joins")

    # A storm of leaves: the same, the other way.
    roster.frames.clear()
    started = time.monotonic()
    await asyncio.gather(*(s.send(type="leave", room="hall") for s in socks))
    await roster.until({w.user, legacy.user}, timeout=limit(10))
    took = time.monotonic() - started
    assert roster.members == await truth("hall")
    assert sorted(roster.left) == sorted(ids)
    assert len(roster.diffs()) <= took / tick + 2
    assert len(roster.diffs()) < N / 3


async def until_next_slot() -> None:
    """Until the next slot of membership changes starts."""
    _, into, t = roomstate._slot()
    await asyncio.sleep(t - into + 0.05)


@pytest.mark.long
async def test_a_lone_join_goes_out_at_once(redis_client):
    """The first change of a quiet slot is not held for the tick: with five-second ticks, a lone
    join reaches the room well before the next one."""
    channel_layers.backends.clear()
    with presence_settings(MEMBERSHIP_RATE=0.2):
        (_, ca), (_, cb) = await make_user("alice"), await make_user("bob")
        a = await open_socket(ca, "alice", diffs=True)
        b = await open_socket(cb, "bob", diffs=True)
        # Alice's own join may reach the room's feed (that races the feed's group add) and use
        # its slot, or, late in a slot, the next one: bob's join would then wait, as it
        # should. So alice joins as a slot starts, and bob as the next one starts.
        await until_next_slot()
        await join(a, "quiet")
        await until_next_slot()
        started = time.monotonic()
        await b.send(type="join", room="quiet")
        diff = await a.wait_for("presence.diff", room="quiet", timeout=limit(3))
        assert [m["user"] for m in diff["joined"]] == [b.user] and diff["left"] == []
        # at once, or at most the slot's last fifth later: never a whole tick
        assert time.monotonic() - started < roomstate.membership_tick()
        # A status change is an update: a diff without a room, about the user wherever shown.
        await b.send(type="status", state="dnd", message="busy")
        diff = await a.wait_for("presence.diff", timeout=limit(12))
        while "updated" not in diff:
            diff = await a.wait_for("presence.diff", timeout=limit(12))
        assert [(m["user"], m["state"], m["message"]) for m in diff["updated"]] == [
            (b.user, "dnd", "busy")
        ]
        # Its own leave comes back as a diff too (the layer may hand a join of alice's, made
        # before bob's group add, to bob after his snapshot: a repeat of what it showed).
        await b.send(type="leave", room="quiet")
        mine = await b.wait_for("presence.diff", room="quiet", timeout=limit(3))
        while not mine["left"]:
            mine = await b.wait_for("presence.diff", room="quiet", timeout=limit(3))
        assert [m["user"] for m in mine["left"]] == [b.user], mine
        await shutdown()
    channel_layers.backends.clear()


async def test_diffs_keep_the_one_redaction(slow_ticks):
    """Under an ``AUDIENCE`` policy a diff lists only members the viewer may see, and an
    invisible user is in nobody's diff: every frame of every socket is read."""
    (alice, ca), (bob, cb), (carol, cc), (dave, cd) = [
        await make_user(n) for n in ("alice", "bob", "carol", "dave")
    ]
    a_id, b_id, c_id, d_id = (str(u.pk) for u in (alice, bob, carol, dave))
    RELATION.update({a_id: {a_id, b_id}, b_id: {a_id, b_id, c_id, d_id}})
    RELATION.update({c_id: {a_id, b_id, c_id, d_id}, d_id: {a_id, b_id, c_id, d_id}})
    with presence_settings(MEMBERSHIP_RATE=2, AUDIENCE="tests.realtime.test_big_rooms.audience"):
        a = await open_socket(ca, "alice", diffs=True)
        b = await open_socket(cb, "bob", diffs=True)
        ra = Roster(a, "hall", await join(a, "hall"))
        rb = Roster(b, "hall", await join(b, "hall"))
        await rb.until({a_id, b_id}, timeout=limit(5))
        d = await open_socket(cd, "dave", diffs=True)
        await d.send(type="status", state="invisible")
        deadline = asyncio.get_running_loop().time() + limit(5)
        while (await presence.aget(d_id, viewer=presence.TRUSTED)).state != "invisible":
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        await join(d, "hall")  # invisible: nobody hears of it
        c = await open_socket(cc, "carol", diffs=True)
        await join(c, "hall")
        await rb.until({a_id, b_id, c_id}, timeout=limit(5))  # bob sees carol, not dave
        await c.send(type="status", state="dnd")
        await c.send(type="leave", room="hall")
        await rb.until({a_id, b_id}, timeout=limit(5))
        # Bob sees carol's status; a further diff about bob's own dnd is the last word.
        await b.send(type="status", state="dnd")
        got: list[dict[str, Any]] = []
        deadline = asyncio.get_running_loop().time() + limit(5)
        while not any(m["user"] == b_id for f in got for m in f.get("updated", ())):
            assert asyncio.get_running_loop().time() < deadline, got
            got.append(await a.wait_for("presence.diff", timeout=limit(5)))
        frames = ra.frames + got + await a.collect(2 * roomstate.membership_tick())
        frames += rb.frames + await b.collect(0)
        seen_by_a = {
            m["user"]
            for f in ra.frames + got
            for k in ("joined", "left", "updated")
            for m in f.get(k, ())  # fmt: skip
        }
        assert c_id not in seen_by_a and d_id not in seen_by_a, seen_by_a
        assert b_id in seen_by_a
        for f in frames:
            assert d_id not in users_in(f), f  # the invisible user: in no frame of anybody's


# -- count-only rooms ------------------------------------------------------------------------------
COUNT_ONLY = {"MEMBERSHIP_RATE": 2, "COUNT_ONLY_ROOMS": [r"stadium(-\d+)?"]}


async def counted(sock: Socket, room: str, count: int, timeout: float) -> list[dict[str, Any]]:
    """``sock``'s frames until a ``presence.count`` of ``room`` says ``count``."""
    frames: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        left = deadline - loop.time()
        assert left > 0, f"{sock.name}: no count {count}; {frames[-5:]}"
        try:
            frame = await sock.next(left)
        except TimeoutError:
            continue
        frames.append(frame)
        frame = {k: v for k, v in frame.items() if k != "counted"}  # a join's own count says it
        if frame == {"type": "presence.count", "room": room, "count": count}:
            return frames


async def test_a_count_only_room_never_names_a_member_to_another(slow_ticks):
    """Every frame of every socket in a count-only room is read: none names anybody but the
    socket's own user, whatever they do there (join, status, typing, room state, leave)."""
    tick = slow_ticks
    people = [await make_user(f"fan{n}") for n in range(8)]
    with presence_settings(**COUNT_ONLY):
        socks = [
            await open_socket(c, u.username, diffs=n % 2 == 0) for n, (u, c) in enumerate(people)
        ]
        frames: dict[str, list[dict[str, Any]]] = {s.user: [] for s in socks}
        first = socks[0]
        await first.send(type="join", room="stadium")
        frames[first.user] += await counted(first, "stadium", 1, limit(5))
        reads = roomstate.get_counts().reads
        started = time.monotonic()
        await asyncio.gather(*(s.send(type="join", room="stadium") for s in socks[1:]))
        frames[first.user] += await counted(first, "stadium", len(socks), limit(10))
        took = time.monotonic() - started
        # The joins cost the first member a frame a tick at most, the process a read a tick
        # (and one a joiner: its own count at once).
        heard = [f for f in frames[first.user] if f["type"] == "presence.count"]
        assert len(heard) <= took / tick + 3, (len(heard), took)
        assert roomstate.get_counts().reads - reads <= len(socks) - 1 + took / tick + 2
        # What a member might give away, tried: each is refused or reaches nobody.
        for s in socks:
            await s.send(type="typing", room="stadium")
            await s.send(type="roomstate", room="stadium", data={"x": 1})
        errors = [await s.wait_for("error", frame="typing") for s in socks]
        assert {e["code"] for e in errors} == {"forbidden"}
        await socks[1].send(type="status", state="dnd", message="cheering")
        # refused by the front door: a room state there would name its member
        assert await presence.aset_room_state(socks[2].user, "stadium", {"seat": 7}) is False
        for s in socks[:3]:
            await s.send(type="leave", room="stadium")
        for s in socks[3:]:
            frames[s.user] += await counted(s, "stadium", len(socks) - 3, limit(10))
        await asyncio.sleep(2 * tick)  # a window for anything stray (nothing may come)
        for s in socks:
            frames[s.user] += await s.collect(0.2)
            named = set().union(*(users_in(f) for f in frames[s.user]))
            assert named <= {s.user}, (s.name, named - {s.user})
        assert len(await truth("stadium")) == len(socks) - 3


async def test_a_count_only_rooms_sample_is_bounded(slow_ticks):
    people = [await make_user(f"fan{n}") for n in range(4)]
    with presence_settings(**COUNT_ONLY, COUNT_SAMPLE=2):
        socks = [await open_socket(c, u.username, diffs=True) for u, c in people]
        for s in socks:
            await join_counted(s, "stadium-1")
        first = socks[0]
        frame = await first.wait_for("presence.count", room="stadium-1", count=4, timeout=limit(5))
        assert [m["user"] for m in frame["sample"]] == [socks[0].user, socks[1].user]
        assert {m["state"] for m in frame["sample"]} == {"online"}


async def join_counted(sock: Socket, room: str) -> dict[str, Any]:
    await sock.send(type="join", room=room)
    return await sock.wait_for("presence.count", room=room)


def test_the_count_only_settings_are_checked():
    from presence_app.checks import check_count_only_rooms

    with presence_settings(COUNT_ONLY_ROOMS=["ok-.*"], COUNT_SAMPLE=3):
        assert check_count_only_rooms() == []
    with presence_settings(COUNT_ONLY_ROOMS=["(unclosed"], COUNT_SAMPLE=-1):
        assert [e.id for e in check_count_only_rooms()] == ["presence_app.E044"] * 2
    with presence_settings(COUNT_ONLY_ROOMS="stadium"):
        assert [e.id for e in check_count_only_rooms()] == ["presence_app.E044"]


# -- snapshots of big rooms: paged and bounded in bytes --------------------------------------------
async def test_a_big_rooms_snapshot_comes_in_pages_bounded_in_bytes(slow_ticks):
    import json

    people = [await make_user(f"talker{n}") for n in range(12)]
    with presence_settings(MEMBERSHIP_RATE=2, ROOM_SNAPSHOT_BYTES=1024, ROOM_SNAPSHOT_PAGE=5):
        socks = [await open_socket(c, u.username, diffs=True) for u, c in people]
        for n, s in enumerate(socks):
            await s.send(type="status", message=f"{n} " + "x" * 120)
            await join(s, "forum")
        await socks[0].send(type="roomstate", room="forum", data={"note": "y" * 500})
        _, cr = await make_user("reader")
        viewer = await open_socket(cr, "reader", diffs=True)
        deadline = asyncio.get_running_loop().time() + limit(5)
        while not await presence.aroom_states("forum", viewer=presence.TRUSTED):
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        # the joins' diff has gone out: a read shared with the talkers' joins (theirs is
        # completed by that diff) no longer serves, the reader's snapshot is the whole room
        await asyncio.sleep(2 * slow_ticks)
        await viewer.send(type="join", room="forum")
        frames = [await viewer.wait_for("presence.state", room="forum")]
        while frames[-1]["more"]:
            frames.append(await viewer.wait_for("presence.state", room="forum"))
        assert [f["page"] for f in frames] == list(range(len(frames)))
        members = [m["user"] for f in frames for m in f["members"]]
        assert sorted(members) == sorted([s.user for s in socks] + [viewer.user])
        assert len(members) == len(set(members))
        assert all(len(f["members"]) <= 5 for f in frames)
        for f in frames:  # over the bound only by a frame of one member (and their states)
            assert len(json.dumps(f)) <= 1024 + 400 or len(f["members"]) == 1, f
        assert len(frames) > len(members) / 5  # the bytes cut pages the count alone would not
        states = [st for f in frames for st in f["states"]]
        assert [st["user"] for st in states] == [socks[0].user]


def test_the_api_pages_a_big_room_and_bounds_its_bytes(client, redis_client):
    """``GET presence/api/rooms/<room>/``: ``?offset=&limit=`` pages, ``next`` until the last,
    about ``ROOM_SNAPSHOT_BYTES`` a page; a count-only room answers its count alone."""
    import json

    from ..users import create_user

    client.force_login(create_user("reader"))
    ids = [f"member-{n:02d}" for n in range(30)]
    for uid in ids:
        presence.connect(f"c-{uid}", uid)
        presence.set_status(uid, message="m" * 100)
        presence.join("arena", f"c-{uid}", uid)
        presence.join("stadium-9", f"c-{uid}", uid)
    with presence_settings(ROOM_SNAPSHOT_BYTES=2048, COUNT_ONLY_ROOMS=[r"stadium-\d+"]):
        body = client.get("/presence/api/rooms/arena/", {"limit": 3}).json()
        assert body["count"] == 30 and len(body["members"]) == 3 and body["next"] == 3
        body = client.get("/presence/api/rooms/arena/", {"offset": 3, "limit": 100}).json()
        assert 1 < len(body["members"]) < 27 and body["next"] == 3 + len(body["members"])
        seen, offset, pages = [], 0, 0
        while offset is not None:
            reply = client.get("/presence/api/rooms/arena/", {"offset": offset})
            assert reply.status_code == 200
            page = reply.json()
            assert len(reply.content) <= 2048 + 400 or len(page["members"]) == 1
            seen += [m["user"] for m in page["members"]]
            offset, pages = page["next"], pages + 1
        assert seen == ids and pages > 1  # each once, in the order they came
        assert client.get("/presence/api/rooms/arena/", {"limit": 0}).status_code == 400
        counted = client.get("/presence/api/rooms/stadium-9/").json()
        assert counted == {"room": "stadium-9", "count": 30, "members": [], "offset": 0,
                           "next": None}  # fmt: skip
        assert "member-" not in json.dumps(counted)


# -- the htmx stream draws a diff and a count ------------------------------------------------------
async def test_the_htmx_stream_draws_a_diff_once_and_a_count(slow_ticks):
    from channels.layers import get_channel_layer

    from presence_app.realtime.htmx import HtmlEventStream

    user, _ = await make_user("page")
    layer = get_channel_layer()
    stream = HtmlEventStream(
        user, layer, await layer.new_channel(), None, rooms=[], users=[], language=None
    )
    assert stream.session.batched  # it takes its joins and leaves batched
    member = {"state": "online", "at": 1.0, "message": "", "emoji": ""}
    await stream.render({"type": "presence.state", "room": "hall", "members": [], "page": 0})
    events = await stream.render(
        {
            "type": "presence.diff",
            "room": "hall",
            "left": [],
            "joined": [{**member, "user": "u1"}, {**member, "user": "u2"}],
        }  # fmt: skip
    )
    names = [name for name, _ in events]
    assert names.count("presence-room-hall") == 1 and names.count("presence-count-hall") == 1
    assert dict(events)["presence-count-hall"] == "2"
    assert {"presence-dot-u1", "presence-dot-u2"} <= set(names)
    events = await stream.render(
        {
            "type": "presence.diff",
            "room": "hall",
            "joined": [],
            "left": [{**member, "user": "u1", "state": "offline", "at": None}],
        }  # fmt: skip
    )
    assert dict(events)["presence-count-hall"] == "1"
    events = await stream.render({"type": "presence.diff", "updated": [{**member, "user": "u2",
                                  "state": "dnd"}]})  # fmt: skip
    assert "presence-dnd" in dict(events)["presence-dot-u2"]
    assert "presence-room-hall" in dict(events)  # the room it is in, drawn again
    events = await stream.render({"type": "presence.count", "room": "stadium", "count": 12345})
    assert dict(events)["presence-count-stadium"] == "12345"
    assert dict(events)["presence-room-stadium"] == '<ul class="presence-roster"></ul>'


# -- one decode per room per process: the room's feed ----------------------------------------------
def feed_channels(room: str) -> set[str]:
    """The channels of this process (this test's loop) that the pub/sub layer hands the room's
    group messages to: each one decodes every event of the room."""
    from channels.layers import get_channel_layer

    from presence_app.core import dispatch

    local = get_channel_layer()._get_layer()
    return set(local.groups.get(local._get_group_channel_name(dispatch.room_group(room)), ()))


async def test_a_room_event_reaches_a_process_once_and_its_sockets_as_one_frame(slow_ticks):
    """However many sockets of a process are in a room, one channel of the process listens to
    its events (its feed): a storm reaches every watcher, diff-accepting or not, with no member
    lost or told twice, and the watchers of one class get the very same frames."""
    watchers = [await make_user(f"w{n}") for n in range(8)]
    joiners = [await make_user(f"j{n}") for n in range(N)]
    batched = [await open_socket(c, u.username, diffs=True) for u, c in watchers[:4]]
    each = [await open_socket(c, u.username, diffs=False) for u, c in watchers[4:]]
    rosters = [Roster(w, "hall", await join(w, "hall")) for w in batched]
    for w in each:
        await join(w, "hall")
    here = {w.user for w in batched + each}
    for r in rosters:
        await r.until(here, timeout=limit(5))
        r.frames.clear(), r.joined.clear()
    assert len(feed_channels("hall")) == 1  # not one a socket
    socks = [await open_socket(c, u.username, diffs=False) for u, c in joiners]
    ids = {s.user for s in socks}
    await asyncio.gather(*(s.send(type="join", room="hall") for s in socks))
    for r in rosters:
        await r.until(here | ids, timeout=limit(15))
        assert sorted(r.joined) == sorted(ids)  # each once
    assert rosters[0].members == await truth("hall")
    # one flush, one frame, the same to every watcher of the class
    assert all(r.diffs() == rosters[0].diffs() for r in rosters), [len(r.diffs()) for r in rosters]
    assert len(rosters[0].diffs()) < N / 3
    for w in each:  # a frame a join, each once, to those that did not accept diffs
        told: list[str] = []
        while not ids <= set(told):
            told.append((await w.wait_for("presence.join", room="hall", timeout=limit(5)))["user"])
        assert sorted(u for u in told if u in ids) == sorted(ids)
        assert [f for f in await w.collect(0.3) if f["type"] == "presence.join"] == []
    assert len(feed_channels("hall")) == 1
    # The last one out lets the room's group go.
    for s in [*socks, *batched, *each]:
        await s.send(type="leave", room="hall")
    deadline = asyncio.get_running_loop().time() + limit(5)
    while feed_channels("hall"):
        assert asyncio.get_running_loop().time() < deadline, feed_channels("hall")
        await asyncio.sleep(0.05)


async def test_a_slow_socket_holds_up_nobody_and_gets_everything_in_order(slow_ticks):
    """A socket whose sends wait (its client reads slowly) does not delay the room's other
    sockets; once it drains it has every frame, in order, and its roster is the room's."""
    from channels.layers import get_channel_layer

    from presence_app.realtime.session import PresenceSession

    (slow_user, _), (_, ca) = await make_user("slow"), await make_user("alice")
    layer = get_channel_layer()
    gate = asyncio.Event()
    got: list[dict[str, Any]] = []

    async def send(frame: dict[str, Any]) -> None:
        got.append(frame)

    async def send_text(text: str) -> None:
        await gate.wait()  # the client's buffer is full until the gate opens
        got.append(json.loads(text))

    slow = PresenceSession(
        slow_user, layer=layer, channel_name=await layer.new_channel(), send=send,
        send_text=send_text,
    )  # fmt: skip
    await slow.open()

    async def beat() -> None:  # as its socket would (the test's leases are short)
        while True:
            await slow.heartbeat()
            await asyncio.sleep(0.5)

    beating = asyncio.ensure_future(beat())
    slow.accept(["presence.diff"])
    gate.set()  # its snapshot (encoded once for the joiners of a tick) goes out as text
    await slow.join("hall")
    gate.clear()
    a = await open_socket(ca, "alice", diffs=True)
    roster = Roster(a, "hall", await join(a, "hall"))
    others = [await make_user(f"o{n}") for n in range(6)]
    socks = [await open_socket(c, u.username, diffs=True) for u, c in others]
    for s in socks:  # one at a time: each is a frame of its own to the slow socket
        await join(s, "hall")
        await roster.until(roster.members | {s.user}, timeout=limit(5))
    assert len(slow.writer.backlog) >= 2  # frames wait behind the stuck send, alice's did not
    gate.set()
    everyone = await truth("hall")
    deadline = asyncio.get_running_loop().time() + limit(5)
    members: set[str] = set()
    while members != everyone:
        assert asyncio.get_running_loop().time() < deadline, (members, everyone)
        await asyncio.sleep(0.05)
        members = set()
        for f in got:  # the slow socket's view: its snapshot, then each diff, in order
            if f["type"] == "presence.state" and f.get("room") == "hall":
                members = {m["user"] for m in f["members"]}
            elif f["type"] == "presence.diff" and f.get("room") == "hall":
                members -= {m["user"] for m in f["left"]}
                members |= {m["user"] for m in f["joined"]}
    joined = [m["user"] for f in got if f["type"] == "presence.diff" for m in f.get("joined", ())]
    assert joined == [a.user, *(s.user for s in socks)]  # each once, in the order they came
    beating.cancel()
    await slow.close()


# -- a held diff is redacted in its own workspace --------------------------------------------------
def workspace_of(scope: Any) -> str | None:
    """A socket's ``?ws=``: its workspace (``TENANT``)."""
    from urllib.parse import parse_qs

    return parse_qs(scope.get("query_string", b"").decode()).get("ws", [None])[0]


#: The users who, in globex, see nobody but themself.
SECLUDED: set[str] = set()


def audience_of_the_workspace(viewer: Any, user_ids: list[str]) -> list[str]:
    """acme shows everybody to everybody; globex too, but to its secluded users."""
    from presence_app import tenants

    if tenants.current() == "globex" and viewer in SECLUDED:
        return [u for u in user_ids if u == viewer]
    return list(user_ids)


async def frames_until(sock: Socket, wanted: Any, timeout: float) -> list[dict[str, Any]]:
    """Every frame of ``sock`` up to (and with) the first ``wanted`` one."""
    loop, frames = asyncio.get_running_loop(), []
    deadline = loop.time() + timeout
    while not frames or not wanted(frames[-1]):
        left = deadline - loop.time()
        assert left > 0, f"{sock.name}: still waiting; {frames[-5:]}"
        frames.append(await sock.next(left))
    return frames


async def a_fresh_slot() -> None:
    """Sets a try up at the start of a membership slot: its first change goes at once, the
    next one of a room waits for the next slot (not a wait for an outcome: the slots are the
    wall clock's, 5 s long here, and what follows takes a fraction of one)."""
    slot, into, t = roomstate._slot()
    await asyncio.sleep(t - into + 0.05)


@pytest.mark.long
async def test_a_held_diff_is_redacted_in_its_own_workspace(redis_client):
    """A process holds room feeds of two workspaces. A join held for the tick in one's feed
    goes out early when the other's feed sends an update (every feed's joins and leaves first,
    in order); it must still be redacted as its own workspace's policy says (the policy reads
    the workspace it runs in: acme shows everybody, globex shows the viewer and the watcher
    nobody but themself). Globex's held join flushed by an update in acme must not reach the
    globex viewer; acme's held join flushed by an update in globex must reach the watcher."""
    channel_layers.backends.clear()
    SECLUDED.clear()
    hooks = {
        "TENANT": "tests.realtime.test_big_rooms.workspace_of",
        "AUDIENCE": "tests.realtime.test_big_rooms.audience_of_the_workspace",
    }
    with presence_settings(MEMBERSHIP_RATE=0.2, **hooks):  # 5 s slots
        names = ("viewer", "watcher", "y", "x1", "x2", "z1", "z2")
        people = {name: await make_user(name) for name in names}

        async def open_in(name: str, ws: str, *, diffs: bool = False) -> Socket:
            path = f"/ws/presence/?ws={ws}"
            sock = await Socket.open(people[name][1], name=f"{name}@{ws}", path=path)
            sock.beat()
            if diffs:
                await sock.send(type="hello", accept=["presence.diff"])
            return sock

        viewer, watcher = (
            await open_in("viewer", "globex", diffs=True),
            await open_in("watcher", "acme", diffs=True),
        )
        SECLUDED.update({viewer.user, watcher.user})  # (the watcher is in acme: not there)
        y = await open_in("y", "acme")
        x1, x2 = await open_in("x1", "globex"), await open_in("x2", "globex")
        z1, z2 = await open_in("z1", "acme"), await open_in("z2", "acme")
        for sock in (viewer, watcher, y, x1, z1):
            await join(sock, "hall")
        await frames_until(watcher, lambda f: z1.user in users_in(f), limit(20))
        await viewer.send(type="status", message="in")
        await frames_until(viewer, lambda f: f.get("self") and f["message"] == "in", limit(20))

        # Globex holds x2's join; acme's update sends it early: redacted as globex's.
        await a_fresh_slot()
        await x1.send(type="status", message="first")  # globex's first change: at once
        await x2.send(type="join", room="hall")  # the next: held (x1, without diffs, hears it)
        await x1.wait_for("presence.join", room="hall", user=x2.user, timeout=limit(20))
        await y.send(type="status", message="now")  # acme's first change: at once
        await viewer.send(type="status", message="end")  # its own: after the held join
        frames = await frames_until(
            viewer,
            lambda f: any(m["message"] == "end" for m in f.get("updated", [])),
            limit(20),
        )
        leaked = [f for f in frames if users_in(f) & {x1.user, x2.user}]
        assert leaked == [], leaked

        # Acme holds z2's join; globex's update sends it early: still acme's to hear.
        await a_fresh_slot()
        await z1.send(type="status", message="first")  # acme's first change: at once
        await z2.send(type="join", room="hall")  # the next: held (z1, without diffs, hears it)
        await z1.wait_for("presence.join", room="hall", user=z2.user, timeout=limit(20))
        await viewer.send(type="status", message="again")  # globex's first change: at once
        heard = await frames_until(watcher, lambda f: z2.user in users_in(f), limit(20))
        assert any(z2.user in {m["user"] for m in f.get("joined", [])} for f in heard), heard
        await shutdown()
    channel_layers.backends.clear()


# -- a count reaches only the room's members -------------------------------------------------------
#: The gate of the policy below: the first read of a watched viewer waits until let go.
GATE: dict[str, Any] = {}


async def gated_audience(viewer: Any, user_ids: list[str]) -> list[str]:
    """Everybody sees everybody; once armed, the first call for a watched viewer waits."""
    if viewer in GATE.get("watched", ()) and GATE.get("held") is None:
        GATE["held"] = viewer
        GATE["reached"].set()
        await GATE["go"].wait()
    return list(user_ids)


async def test_a_count_reaches_no_one_who_left_while_it_was_read(slow_ticks):
    """Under a policy with ``COUNT_SAMPLE``, a tick's count is read for each member in turn; a
    member that leaves the room while the others' are read gets none of it (a count and faces
    of a room it is no longer in: after a revocation, one it may not see)."""
    people = [await make_user(f"fan{n}") for n in range(3)]
    settings = {
        **COUNT_ONLY,
        "COUNT_SAMPLE": 5,
        "AUDIENCE": "tests.realtime.test_big_rooms.gated_audience",
    }
    GATE.clear()
    with presence_settings(**settings):
        a, b, c = [await open_socket(cookie, u.username, diffs=False) for u, cookie in people]
        for sock in (a, b):
            await join_counted(sock, "stadium")
        GATE.update(watched={a.user, b.user}, reached=asyncio.Event(), go=asyncio.Event())
        await c.send(type="join", room="stadium")  # a tick's count: a's and b's read in turn
        await asyncio.wait_for(GATE["reached"].wait(), limit(10))  # the first one's waits
        held = a if GATE["held"] == a.user else b
        other = b if held is a else a
        await other.send(type="leave", room="stadium")
        await other.wait_for("presence.leave", room="stadium", user=other.user, timeout=limit(10))
        GATE["go"].set()
        # Its frame of that tick, then the leave's tick's (a count of 2, where the first tick
        # had sent 3): the first tick's turns, the other's included, are over by then.
        await held.wait_for("presence.count", room="stadium", timeout=limit(10))
        await held.wait_for("presence.count", room="stadium", count=2, timeout=limit(10))
        await other.send(type="leave", room="stadium")  # refused: its answer ends what came
        since = await frames_until(other, lambda f: f.get("code") == "not_joined", limit(10))
        late = [f for f in since if f["type"] == "presence.count"]
        assert late == [], late
    GATE.clear()


async def test_a_project_that_wraps_its_frames_gets_a_feeds_frames_wrapped(slow_ticks):
    """A feed encodes a frame once for all its sockets, but a consumer that overrides
    ``presence_send`` (to wrap its frames) gets every frame through it, the feed's too."""
    from channels.auth import AuthMiddlewareStack
    from channels.routing import URLRouter
    from django.urls import path

    from presence_app.consumers import PresenceConsumer

    class Wrapping(PresenceConsumer):
        async def presence_send(self, content: dict[str, Any]) -> None:
            await super().presence_send({**content, "wrapped": True})

    app = AuthMiddlewareStack(URLRouter([path("ws/wrapped/", Wrapping.as_asgi())]))
    (_, ca), (_, cb) = await make_user("wrapped"), await make_user("plain")
    a = await Socket.open(ca, path="/ws/wrapped/", app=app, name="wrapped")
    a.beat()
    await join(a, "hall")
    b = await open_socket(cb, "plain", diffs=False)
    await join(b, "hall")
    told = await a.wait_for("presence.join", room="hall", user=b.user, timeout=limit(5))
    assert told["wrapped"] is True
    assert "wrapped" not in await b.wait_for("presence.join", room="hall", user=b.user)


async def test_a_consumer_with_its_own_send_gets_every_frame_through_it(slow_ticks):
    """Presence sends its frames beneath Channels' session middleware (its ``send`` reads the
    session for every message, and acts on none of a socket's), but never past a project's own
    ``send``: a consumer that overrides it gets a feed's frames, and its own, through it."""
    from channels.auth import AuthMiddlewareStack
    from channels.routing import URLRouter
    from django.urls import path

    from presence_app.consumers import PresenceConsumer, websocket_send

    class Marking(PresenceConsumer):
        async def send(self, text_data=None, bytes_data=None, close=False):
            if text_data is not None:
                text_data = json.dumps({**json.loads(text_data), "marked": True})
            await super().send(text_data=text_data, bytes_data=bytes_data, close=close)

    class Plain(PresenceConsumer):
        pass

    app = AuthMiddlewareStack(URLRouter([path("ws/marked/", Marking.as_asgi())]))
    (_, ca), (_, cb) = await make_user("marked"), await make_user("plain")
    a = await Socket.open(ca, path="/ws/marked/", app=app, name="marked")
    a.beat()
    assert (await join(a, "hall"))["marked"] is True
    b = await open_socket(cb, "plain", diffs=False)
    await join(b, "hall")
    told = await a.wait_for("presence.join", room="hall", user=b.user, timeout=limit(5))
    assert told["marked"] is True
    assert "marked" not in await b.wait_for("presence.join", room="hall", user=b.user)
    assert websocket_send(Marking()) is None  # (its base_send is never read then)
    # A consumer of Channels' own send: the server's send, from under the session middleware.
    plain = Plain()
    sent: list[dict[str, Any]] = []

    async def server_send(message: dict[str, Any]) -> None:
        sent.append(message)

    from channels.sessions import InstanceSessionWrapper

    wrapper = InstanceSessionWrapper({"cookies": {}}, server_send)
    plain.base_send = wrapper.send
    out = websocket_send(plain)
    assert out is server_send


# -- a big room's states: a bounded number of frames a second a process ----------------------------
async def test_a_big_rooms_states_go_out_every_kth_tick(slow_ticks):
    """``ROOM_STATE_FRAMES`` bounds the room-state frames a second a process sends one room:
    a room of more sockets than it allows at ``ROOM_STATE_RATE`` gets a frame every k-th tick
    (latest wins); a small room keeps its tick."""
    with presence_settings(ROOM_STATE_RATE=20, ROOM_STATE_FRAMES=100):
        assert [roomstate.stretch(n) for n in (0, 1, 5, 6, 50, 400)] == [1, 1, 1, 2, 10, 80]
        people = [await make_user(f"crowd{n}") for n in range(6)]
        socks = [await open_socket(c, u.username, diffs=True) for u, c in people]
        for s in socks:
            await join(s, "hall")
        from presence_app.realtime.feeds import get_feeds

        (feed,) = [f for key, f in get_feeds().feeds.items() if key[1] == "hall"]
        assert feed.turns.stretch() == 2  # 6 sockets x 20 a second > 100
        # in turns: each slot's frame reaches half of them, and every one gets the state
        await socks[0].send(type="roomstate", room="hall", data={"x": 7})
        for s in socks[1:]:
            await s.wait_for("presence.roomstate", room="hall", timeout=limit(10))
    with presence_settings(ROOM_STATE_RATE=20, ROOM_STATE_FRAMES=0):
        assert roomstate.stretch(400) == 1  # no bound
    from presence_app.checks import check_count_only_rooms

    for wrong in (-1, "many", None):
        with presence_settings(ROOM_STATE_FRAMES=wrong):
            assert [e.id for e in check_count_only_rooms()] == ["presence_app.E047"]
    tick = 1 / 20
    sent: list[dict[str, Any]] = []

    async def send(frame: dict[str, Any]) -> None:
        sent.append(frame)

    for k in (1,):
        with presence_settings(ROOM_STATE_RATE=20):
            sent.clear()
            box = roomstate.Outbox(send)
            slot = k * tick
            # at the start of a slot (its states came in: a fifth of a tick after its tick)
            into = (time.time() - tick * roomstate.GATHER) % slot
            await asyncio.sleep(slot - into + 0.01)
            await box.add("hall", [{"user": "u", "conn": "c", "data": {"x": 1}}])
            assert [f["states"][0]["data"] for f in sent] == [{"x": 1}]  # at once
            await box.add("hall", [{"user": "u", "conn": "c", "data": {"x": 2}}])
            await box.add("hall", [{"user": "u", "conn": "c", "data": {"x": 3}}])
            assert len(sent) == 1  # the next ones wait for the next slot, latest wins
            wait = box.timers["hall"].when() - asyncio.get_running_loop().time()
            assert wait <= tick, wait
            deadline = asyncio.get_running_loop().time() + limit(slot + 1)
            while len(sent) < 2:
                assert asyncio.get_running_loop().time() < deadline, sent
                await asyncio.sleep(0.02)
            assert [f["states"][0]["data"] for f in sent] == [{"x": 1}, {"x": 3}]
            box.close()


async def test_a_big_rooms_sockets_take_turns_and_miss_no_state():
    """``roomstate.Turns``: a room stretched to k slots writes a k-th of its sockets a slot
    (those of turn ``n % k`` at slot n), and each socket's frame carries every state since its
    last, also while k changes (a socket's turns were up to old k + new k - 1 apart). Six
    sockets, a state of its own key (never superseded) in most slots, k going 3, 2, 4, 1, 3, the
    loop held up twice: every socket gets every state, and a slot's turn goes once (twice when
    its states came after it went)."""
    ks = [3] * 6 + [2] * 6 + [4] * 6 + [1] * 4 + [3] * 6
    got: dict[int, dict[tuple[str, str], Any]] = {j: {} for j in range(6)}
    slots: list[int] = []  # the slot of each frame
    state = {"k": ks[0]}

    async def deliver(frame: dict[str, Any], slot: int, k: int) -> None:
        slots.append(slot)
        for j in range(6):
            if j % k == slot % k:
                got[j].update({(st["user"], st["conn"]): st["data"] for st in frame["states"]})

    with presence_settings(ROOM_STATE_RATE=50):  # 20 ms slots
        turns = roomstate.Turns(deliver, lambda: state["k"])
        outbox = roomstate.Outbox(turns.add)
        sent = {}
        for i, k in enumerate(ks):
            state["k"] = k
            if i in (3, 25):  # the loop held up: the turns it owes go before this slot's
                time.sleep(3 * roomstate.tick())
            if i % 5 != 4:  # a quiet slot now and then: turns go on from the ring
                st = {"user": str(i), "conn": f"c{i}", "data": i}
                sent[(st["user"], st["conn"])] = i
                await outbox.add("hall", [st])
            await asyncio.sleep(roomstate.tick())
        deadline = asyncio.get_running_loop().time() + limit(5)
        while any(got[j] != sent for j in range(6)):
            assert asyncio.get_running_loop().time() < deadline, (sent, got)
            await asyncio.sleep(0.02)
        outbox.close()
        turns.close()
    assert slots == sorted(slots)  # in order, a late loop's turns caught up
    assert max(slots.count(n) for n in slots) <= 2


@pytest.mark.parametrize("ks", [(3, 2), (2, 3), (5, 2), (4, 1, 3), (2, 5, 3), (3, 1, 4, 2)])
async def test_turns_miss_no_state_whatever_k_does(ks):
    """``roomstate.Turns`` slot by slot, without the clock: k changes every few slots, sometimes
    before every connection had its turn under the last k, and every slot brings a state of its
    own. Each of 12 connections (turn ``seq % k``) gets every state, however far apart its
    turns came across the changes."""
    got: dict[int, set[int]] = {j: set() for j in range(12)}
    state = {"k": ks[0]}

    async def deliver(frame: dict[str, Any], slot: int, k: int) -> None:
        for j in range(12):
            if j % k == slot % k:
                got[j].update(st["data"] for st in frame["states"])

    turns = roomstate.Turns(deliver, lambda: state["k"])
    base = roomstate.slot_of(time.time()) + 10**6  # far ahead: no timer of its fires here
    sent = set()
    for offset in range(12):  # every place of the changes among the turns
        run = [k for k in ks for _ in range(1 + (offset + k) % 4)] * 2  # each k a few slots
        for step, k in enumerate(run):
            n = base + offset * 1000 + step
            state["k"] = k
            sent.add(n)
            await turns.add(
                {"room": "hall", "states": [{"user": "u", "conn": str(n), "data": n}]}, n
            )
        for m in range(n + 1, n + 12):  # the turns owed after the last state
            await turns.upto(m)
        for j in range(12):
            assert got[j] == sent, (offset, j, sorted(sent - got[j]))
    turns.close()


async def test_a_big_rooms_diffs_go_out_every_kth_tick(slow_ticks):
    """``MEMBERSHIP_FRAMES`` bounds the diff frames a second a process sends one room: a room
    of more diff-accepting sockets than it allows at ``MEMBERSHIP_RATE`` gets a diff every k-th
    tick, with every change of the k ticks; a small room keeps its tick, and the first change
    of a quiet slot still goes at once."""
    with presence_settings(MEMBERSHIP_RATE=5, MEMBERSHIP_FRAMES=20):
        assert [roomstate.membership_stretch(n) for n in (0, 1, 4, 5, 40, 2500)] == [
            1, 1, 1, 2, 10, 625,
        ]  # fmt: skip
        people = [await make_user(f"many{n}") for n in range(6)]
        socks = [await open_socket(c, u.username, diffs=True) for u, c in people]
        for s in socks:
            await join(s, "hall")
        from presence_app.realtime.feeds import get_feeds

        (feed,) = [f for key, f in get_feeds().feeds.items() if key[1] == "hall"]
        assert feed.diffs.stretch() == 2  # 6 sockets x 5 a second > 20
    with presence_settings(MEMBERSHIP_FRAMES=0):
        assert roomstate.membership_stretch(5000) == 1  # no bound
    with presence_settings(MEMBERSHIP_RATE=5, MEMBERSHIP_FRAMES=2500):  # as shipped: 500 keep it
        assert [roomstate.membership_stretch(n) for n in (500, 501, 2500)] == [1, 2, 5]
    from presence_app.checks import check_count_only_rooms

    for wrong in (-1, "many", None):
        with presence_settings(MEMBERSHIP_FRAMES=wrong):
            assert "presence_app.E049" in [e.id for e in check_count_only_rooms()]
    sent: list[dict[str, Any]] = []

    async def send(frame: dict[str, Any]) -> None:
        sent.append(frame)

    async def shown(events: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
        return list(events)

    def joined(user: str) -> dict[str, Any]:
        return {"type": "presence.join", "room": "hall", "user": user, "state": "online"}

    for k in (8, 1):  # a slot of 4 s (k = 8 ticks of 0.5 s), and of one tick
        sent.clear()
        diffs = roomstate.Diffs(send, shown, lambda room: True, lambda k=k: k)
        tick = roomstate.membership_tick()
        slot = k * tick
        into = (time.time() - tick * roomstate.GATHER) % slot
        await asyncio.sleep(slot - into + 0.01)  # the start of a slot
        await diffs.add(joined("a"))
        assert [[m["user"] for m in f["joined"]] for f in sent] == [["a"]]  # at once
        await diffs.add(joined("b"))
        await diffs.add(joined("c"))
        assert len(sent) == 1  # the next ones wait for the next slot, together
        wait = diffs.timer.when() - asyncio.get_running_loop().time()
        if k == 8:
            assert 5 * tick < wait <= slot, wait  # k ticks on, not one
        else:
            assert wait <= tick, wait
        deadline = asyncio.get_running_loop().time() + limit(slot + 1)
        while len(sent) < 2:
            assert asyncio.get_running_loop().time() < deadline, sent
            await asyncio.sleep(0.02)
        assert [[m["user"] for m in f["joined"]] for f in sent] == [["a"], ["b", "c"]]
        diffs.close()
