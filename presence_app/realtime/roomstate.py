"""Live per-member state in a room (a cursor, a selection, "editing section 3"), coalesced.

Each connection may publish one JSON object per room it joined (``ROOM_STATE_MAX_BYTES``). A
cursor moved at 60 Hz must not cost 60 writes and 60 frames a second to every member, so both
ends coalesce, latest wins, at ``ROOM_STATE_RATE`` ticks a second:

- the sending process keeps the latest state per (room, connection) in a
  :class:`RoomStateCoalescer` and flushes once per tick: one ``group_send`` per room carrying all
  its changes, and one round trip writing the latest values for snapshots (the store keeps them
  in a hash per room whose reads drop entries without a live lease);
- each receiving session buffers incoming changes per room (:class:`Outbox`) and sends its
  socket at most one ``presence.roomstate`` frame per room per tick, carrying every member's
  change since the last. Ticks fall on the wall clock's boundaries in every process
  (:func:`next_tick`), so a short wait gathers all processes' flushes of a tick in one frame.

A state is named by the user and the connection's *public id*, a keyed hash of its connection
id: two tabs of one user have two states, and nothing a viewer learns can drive a connection.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import Any

from django.conf import settings

from .. import conf
from ..core import dispatch, rules, tenants
from ..core.tasks import Batch, per_loop
from ..failopen import log_outage
from ..store import UNAVAILABLE
from .protocol import FrameError

#: The public id of state set from Python (:func:`presence_app.presence.set_room_state`).
SERVER = "server"
#: The part of a tick a receiving socket waits to gather the sending processes' flushes.
GATHER = 0.4


@lru_cache(maxsize=4096)
def public_id(conn_id: str) -> str:
    """The connection's id as others may see it: a keyed hash, so it cannot be turned back
    into the connection id (nor into an SSE stream's token)."""
    key = hashlib.sha256(f"presence_app.roomstate\0{settings.SECRET_KEY}".encode()).digest()
    return hashlib.blake2b(conn_id.encode(), key=key[:32], digest_size=9).hexdigest()


def tick() -> float:
    """Seconds between two flushes (``1 / ROOM_STATE_RATE``)."""
    return 1.0 / max(float(conf.get("ROOM_STATE_RATE")), 0.1)


def stretch(sockets: int) -> int:
    """Slots between two room-state frames to a socket of a room of ``sockets`` of this
    process: 1, or more when ``ROOM_STATE_FRAMES`` bounds the frames a second the process sends
    for one room (a big room's sockets then get a frame every k-th slot, latest wins, in
    :class:`Turns`: a k-th of them a slot)."""
    budget = float(conf.get("ROOM_STATE_FRAMES") or 0)
    if budget <= 0 or sockets <= 0:
        return 1
    return max(1, math.ceil(sockets * max(float(conf.get("ROOM_STATE_RATE")), 0.1) / budget))


def membership_tick() -> float:
    """Seconds between two frames of membership changes (``1 / MEMBERSHIP_RATE``): a
    ``presence.diff`` or a ``presence.count`` of a room."""
    return 1.0 / max(float(conf.get("MEMBERSHIP_RATE")), 0.1)


def membership_stretch(sockets: int) -> int:
    """Membership ticks a slot of a room's diffs lasts for a room of ``sockets`` of this process
    that accept ``presence.diff``: 1, or more when ``MEMBERSHIP_FRAMES`` bounds the diff frames
    a second the process sends for one room (a big room's sockets then get a diff every k-th
    tick, everything of the k ticks in it)."""
    budget = float(conf.get("MEMBERSHIP_FRAMES") or 0)
    if budget <= 0 or sockets <= 0:
        return 1
    rate = max(float(conf.get("MEMBERSHIP_RATE")), 0.1)
    return max(1, math.ceil(sockets * rate / budget))


def next_tick(last: float) -> float:
    """The next flush: the first boundary of the wall clock's ticks (multiples of the tick) not
    past and at least half a tick after ``last`` (so, after a flush on a boundary, the next
    boundary). Every process flushes on the same boundaries, so a receiving socket gets their
    changes together, in one frame."""
    t = tick()
    return math.ceil(max(last + t / 2, time.time()) / t) * t


def encode(data: Any) -> str | None:
    """``data`` as the compact JSON the store keeps (None: remove the state). A state over
    ``ROOM_STATE_MAX_BYTES`` is refused as ``too_large`` (a frame's own size limit is separate)."""
    try:
        return rules.room_state(data)
    except rules.RoomStateTooLarge as exc:
        raise FrameError("too_large", str(exc)) from None


def entry(user_id: str, public: str, data: Any) -> dict[str, Any]:
    """One member's state as frames carry it (``data`` None: the state is gone)."""
    return {"user": user_id, "conn": public, "data": data}


# -- the sending side: one process's latest states, flushed once per tick ------------------------


class RoomStateCoalescer(Batch):
    """The latest state of each (room, connection) of this process, flushed once per tick."""

    idle = 20  # quiet ticks
    # (tenant, room) -> {conn_id: (session, JSON or None)}
    pending: dict[tuple[str | None, str], dict[str, tuple[Any, str | None]]]

    def wait(self, last: float) -> float:
        return next_tick(last) - time.time()

    def put(self, session: Any, room: str, text: str | None) -> None:
        self.pending.setdefault((session.tenant, room), {})[session.conn_id] = (session, text)
        self.wake()

    def discard(self, session: Any, room: str) -> None:
        """The connection left ``room`` (or closed): its pending change is moot."""
        part = self.pending.get((session.tenant, room))
        if part is not None:
            part.pop(session.conn_id, None)
            if not part:
                del self.pending[(session.tenant, room)]

    async def flush(self) -> None:
        from .. import presence  # the front door imports this module

        batch, self.pending = self.pending, {}
        by_tenant: dict[str | None, dict[str, list[tuple[Any, str | None]]]] = {}
        for (tenant, room), part in batch.items():
            live = [
                (s, text)
                for s, text in part.values()
                if not s.closed and room in s.rooms and (text is None or s.publishes)
            ]
            if live:
                by_tenant.setdefault(tenant, {})[room] = live
        for tenant, rooms in by_tenant.items():
            self.flushes += 1
            entries = {
                room: [(s.user_id, s.public_id, s.conn_id, text) for s, text in live]
                for room, live in rooms.items()
            }
            with tenants.activate(tenant):
                try:
                    await presence.apublish_room_states(entries)
                except UNAVAILABLE as exc:
                    log_outage(exc, "room states not sent")


_coalescer = per_loop(RoomStateCoalescer)


def get_coalescer() -> RoomStateCoalescer:
    """The room-state coalescer of the running event loop (one per process)."""
    return _coalescer()


# -- the receiving side: one frame per room per tick to a socket ---------------------------------
def slot_of(at: float) -> int:
    """The slot of room states ``at`` falls in, counted in ticks (see :class:`Outbox`)."""
    base = tick()
    return int((at - base * GATHER) // base)


class Outbox:
    """A connection's incoming state changes, per room, latest wins, sent at most one frame per
    *slot*. Slots are the wall clock's ticks shifted by a fifth of a tick (:data:`GATHER`), the
    time the sending processes' flushes of a tick (:func:`next_tick`) take to arrive, so one
    frame carries them all. Fixed slots, not "a tick after the last frame": a late frame must
    not push every later one back (delays would only ever grow). A room's feed puts its
    :class:`Turns` behind one."""

    def __init__(self, send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        self.send = send
        self.buffered: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self.last: dict[str, int] = {}  # room -> the tick its last frame's slot started at
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        # What goes out before a room's frame (Diffs.ahead: the membership changes before it).
        self.ahead: Callable[[str], Awaitable[None]] | None = None

    async def add(self, room: str, states: list[dict[str, Any]]) -> None:
        self.buffered.setdefault(room, {}).update({(st["user"], st["conn"]): st for st in states})
        if room in self.timers:
            return  # a frame is due at the next slot
        t = tick()
        # Slot n starts at (n + GATHER) * t: the flushes of the tick starting at n * t are in.
        slot, into = divmod(time.time() - t * GATHER, t)
        # Sent at once if this slot has had no frame, unless the next tick's flushes are about
        # to arrive (the slot's last fifth of a tick): then they go together at the next slot's
        # start.
        if slot > self.last.get(room, -1) and into < t - t * GATHER:
            self.last[room] = int(slot)
            await self.flush(room)
            return
        self.last[room] = int(slot) + 1
        self.timers[room] = asyncio.get_running_loop().call_later(t - into, self._due, room)

    def _due(self, room: str) -> None:
        self.timers.pop(room, None)
        task = asyncio.get_running_loop().create_task(self.flush(room))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def flush(self, room: str) -> None:
        states = self.buffered.pop(room, None)
        if states:
            if self.ahead is not None:
                await self.ahead(room)
            await self.send(
                {"type": "presence.roomstate", "room": room, "states": [*states.values()]}
            )

    def drop(self, room: str) -> None:
        """The connection left ``room``: nothing more about it."""
        self.buffered.pop(room, None)
        self.last.pop(room, None)
        timer = self.timers.pop(room, None)
        if timer is not None:
            timer.cancel()

    def close(self) -> None:
        for room in list(self.timers):
            self.drop(room)
        for task in self.tasks:
            task.cancel()


class Turns:
    """A room's states to its local connections in turns, behind its feed's :class:`Outbox`.

    A room stretched to k slots (``ROOM_STATE_FRAMES``) gives each connection a frame every
    k-th slot. Were they all on the same slot, every k-th slot would write the whole room at
    once and its last sockets would wait for all the others' writes; instead the connections
    take turns, those of turn ``n % k`` at slot n, so a slot writes a k-th of the room. A turn's
    frame carries every state of the slots since that turn last came, latest wins, from a ring
    of slots: the last k (more for a while after k changed: a connection's last turn under the
    old k and its first under the new one are then up to old k + new k - 1 apart). A state
    seen twice costs nothing (latest wins); none is missed. ``deliver(frame, n, k)`` sends
    slot n's frame to the connections of turn ``n % k``; with k = 1 that is every connection,
    each slot a state came in."""

    def __init__(
        self,
        deliver: Callable[[dict[str, Any], int, int], Awaitable[None]],
        stretch: Callable[[], int],
    ) -> None:
        self.deliver = deliver
        self.stretch = stretch
        self.ring: dict[int, dict[tuple[str, str], dict[str, Any]]] = {}  # slot -> its states
        self.room = ""
        self.done: int | None = None  # the last slot whose turn went
        self.k, self.reach, self.since = 1, 1, 0  # k, the ring's span, the slot k last changed
        self.timer: asyncio.TimerHandle | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.lock = asyncio.Lock()  # turns in order

    async def add(self, frame: dict[str, Any], slot: int | None = None) -> None:
        """The slot's frame from the :class:`Outbox` (one a slot at most): its turn now.
        ``slot``: the slot it is for, now's by default."""
        # (an Outbox sends at a slot's start, a timer's hair early or late, or before its last
        # fifth: half a fifth on is well inside the slot)
        if slot is None:
            slot = slot_of(time.time() + tick() * GATHER / 2)
        n = max(slot, self.done or 0)  # (a clock set back)
        self.room = frame["room"]
        self.ring.setdefault(n, {}).update({(st["user"], st["conn"]): st for st in frame["states"]})
        await self.upto(n, came=True)

    async def upto(self, n: int, came: bool = False) -> None:
        """The turns owed up to slot ``n``'s, in order (a late loop catches up: a turn passed
        over would leave its connections without the states of its slots). ``came``: slot n's
        states just came (its turn goes again if it went); else a timer's turn, which a later
        slot's catch-up may have made already."""
        async with self.lock:
            if self.done is not None and (n < self.done or (n == self.done and not came)):
                return  # made already, and the timer of what is owed after it is set
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            k = max(1, self.stretch())
            if k != self.k:
                # a connection's last turn may be up to max(reach, old k) slots back, and its
                # first turn under the new k up to k - 1 slots on: the ring spans both
                self.reach, self.k, self.since = max(self.reach, self.k) + k - 1, k, n
            elif n - self.since >= self.reach:
                self.reach = k
            # the turns from the one after the last (this one again, if it went before this
            # slot's states came) to n, but those whose window holds nothing
            first = n if self.done is None or self.done >= n else self.done + 1
            owed = max(self.ring, default=n) + self.reach - 1
            for m in range(first, n + 1):
                if m == n or m <= owed:
                    await self._turn(m, k)
            self.done = max(n, self.done if self.done is not None else n)
            if any(m > n + 1 - self.reach for m in self.ring):  # turns to come are owed states
                # the next slot's, in its middle: a slot its states reach (the Outbox sends them
                # at its start) has had its turn by then, and the timer is cancelled
                at = (n + 1 + GATHER + 0.5) * tick()
                self.timer = asyncio.get_running_loop().call_later(
                    max(0.0, at - time.time()), self._due, n + 1
                )

    async def _turn(self, m: int, k: int) -> None:
        for old in [s for s in self.ring if s <= m - self.reach]:
            del self.ring[old]  # out of every window
        states: dict[tuple[str, str], dict[str, Any]] = {}
        for s in sorted(self.ring):
            if s <= m:
                states.update(self.ring[s])
        if states:
            frame = {"type": "presence.roomstate", "room": self.room, "states": [*states.values()]}
            await self.deliver(frame, m, k)

    def _due(self, n: int) -> None:
        self.timer = None
        task = asyncio.get_running_loop().create_task(self.upto(n))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        for task in self.tasks:
            task.cancel()


# -- membership changes: one frame per room per slot to a socket ----------------------------------
#: The events a socket that accepts ``presence.diff`` gets batched.
DIFF_EVENTS = frozenset({"presence.join", "presence.leave", "presence.update"})


def _slot(k: int = 1) -> tuple[int, float, float]:
    """The current slot of membership changes (their ticks shifted by :data:`GATHER`, ``k``
    ticks long), counted in ticks, how far into it, and its length."""
    base = membership_tick()
    t = base * k
    slot, into = divmod(time.time() - base * GATHER, t)
    return int(slot) * k, into, t


def diff_entry(event: dict[str, Any]) -> dict[str, Any]:
    """A join's, leave's or update's member as a ``presence.diff`` lists it."""
    entry = dict(event)
    entry.pop("type", None)
    entry.pop("room", None)
    return entry


class Diffs:
    """A connection's membership changes, sent at most once per slot (``MEMBERSHIP_RATE`` a
    second, placed as :class:`Outbox`'s): a ``presence.diff`` frame per room with its ``joined`` and ``left``
    members, then one with the ``updated`` users (a status, idle, offline: about the user
    wherever the browser shows them). Latest wins per user: a join then a leave in one slot is
    a leave. The first change of a quiet slot goes at once, so a lone join costs no wait; a
    storm of joins costs each socket a frame per slot, not a frame per join.

    ``redact(events)`` is the session's one redaction, run once per flush for the whole batch
    (one ``AUDIENCE`` call): a member the viewer may not see is left out. ``keep(room)``: is
    the connection still in ``room`` (a room left meanwhile gets nothing)? ``stretch()``: how
    many ticks a slot lasts (a room feed's: :func:`membership_stretch`; 1 without it)."""

    def __init__(
        self,
        send: Callable[[dict[str, Any]], Awaitable[None]],
        redact: Callable[[list[dict[str, Any]]], Awaitable[list[dict[str, Any] | None]]],
        keep: Callable[[str], bool],
        stretch: Callable[[], int] | None = None,
    ) -> None:
        self.send = send
        self.redact = redact
        self.keep = keep
        self.stretch = stretch
        self.rooms: dict[str, dict[str, dict[str, Any]]] = {}  # room -> user -> join/leave
        self.updates: dict[str, dict[str, Any]] = {}  # user -> latest update
        self.last = -1  # the slot of the last flush
        self.timer: asyncio.TimerHandle | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.lock = asyncio.Lock()  # flushes in order: a slow redaction holds the next one

    async def add(self, event: dict[str, Any]) -> None:
        uid = str(event.get("user", ""))
        if event.get("type") == "presence.update":
            part = self.updates
        else:
            part = self.rooms.setdefault(str(event.get("room")), {})
        part.pop(uid, None)  # latest wins, in the order of the last change
        part[uid] = event
        if self.timer is not None:
            return  # a frame is due at the next slot
        k = max(1, self.stretch()) if self.stretch is not None else 1
        slot, into, t = _slot(k)
        # at once if this slot has had no frame, unless the next tick's changes are about to
        # arrive (the slot's last fifth of a tick)
        if slot > self.last and into < t - membership_tick() * GATHER:
            self.last = slot
            await self.flush()
            return
        self.last = slot + k
        self.timer = asyncio.get_running_loop().call_later(t - into, self._due)

    def _due(self) -> None:
        self.timer = None
        task = asyncio.get_running_loop().create_task(self.flush())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def flush(self) -> None:
        async with self.lock:
            rooms, self.rooms = self.rooms, {}
            updates, self.updates = self.updates, {}
            events = [e for part in rooms.values() for e in part.values()]
            events += updates.values()
            if not events:
                return
            shown = iter(await self.redact(events))
            frames = []
            for room, part in rooms.items():
                diff: dict[str, Any] = {"type": "presence.diff", "room": room, "joined": [],
                                        "left": []}  # fmt: skip
                for event in part.values():
                    seen = next(shown)
                    if seen is not None:
                        key = "joined" if event.get("type") == "presence.join" else "left"
                        diff[key].append(diff_entry(seen))
                if (diff["joined"] or diff["left"]) and self.keep(room):
                    frames.append(diff)
            updated = [diff_entry(s) for s in shown if s is not None]
            if updated:
                frames.append({"type": "presence.diff", "updated": updated})
            for frame in frames:
                await self.send(frame)

    async def ahead(self, room: str) -> None:
        """A typing or a room state of ``room`` is about to go out, at once: the changes held
        for the tick go first, and a flush on its way ends first. A member's typing or cursor
        must not reach a browser before the diff that shows them there (it reads as someone it
        was never told of: an invisible user's giveaway, to a client that checks)."""
        if room in self.rooms or self.updates or self.lock.locked():
            await self.flush()

    @asynccontextmanager
    async def snapshot(self, room: str) -> AsyncIterator[None]:
        """While a snapshot of ``room`` is read and sent: it holds every change buffered so far
        (each was written before it was announced), so they are dropped, after any flush on its
        way (a frame older than the snapshot must not follow it); a change that comes meanwhile
        (a recovery's snapshot runs beside the events) goes out after it, not before it."""
        async with self.lock:
            self.rooms.pop(room, None)
            yield

    def drop(self, room: str) -> None:
        """The connection left ``room``: nothing more about it."""
        self.rooms.pop(room, None)

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        for task in self.tasks:
            task.cancel()


# -- count-only rooms: one count a tick, read once per process -------------------------------------
class RoomCounts:
    """The count-only rooms (``COUNT_ONLY_ROOMS``) this process's connections are in. Their
    joins and leaves reach the process once, as ``presence.count`` marks on a channel of its own
    (:func:`~presence_app.core.dispatch.count_group`); at most once a tick each changed room's
    count is read once and sent to its local members as a ``presence.count`` frame: a join costs
    the others nothing until then, and no member's id ever reaches them (a ``COUNT_SAMPLE``
    names that many members, read as a signed-out visitor reads them)."""

    def __init__(self) -> None:
        self.rooms: dict[tuple[str | None, str], set[Any]] = {}  # (tenant, room) -> sessions
        self.sent: dict[tuple[str | None, str], dict[str, Any]] = {}
        self.dirty: set[tuple[str | None, str]] = set()
        self.layer: Any = None
        self.channel: str | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.ticker: asyncio.Task[None] | None = None
        self.reads = 0  # counts read (the tests' and the bench's measure)
        self.renewed = 0.0  # when the groups were last added (the layer forgets them)

    async def add(self, session: Any, room: str) -> None:
        """``session`` is in ``room`` (a count-only one): it gets the count now, then each
        change of it on the tick."""
        key = (session.tenant, room)
        first = key not in self.rooms
        self.rooms.setdefault(key, set()).add(session)
        if first:
            if self.channel is None:
                self.layer = session.layer
                self.channel = await session.layer.new_channel()
                self.renewed = asyncio.get_running_loop().time()
                task = asyncio.get_running_loop().create_task(self._receive())
                self.tasks.add(task)
            with tenants.activate(session.tenant):
                await self.layer.group_add(dispatch.count_group(room), self.channel)
        await self.refresh(session, room)

    async def renew(self) -> None:
        """Adds every group again before the layer's ``group_expiry`` forgets them (the
        sessions' heartbeats call this; it does the work twice a ``group_expiry``)."""
        if self.channel is None:
            return
        now = asyncio.get_running_loop().time()
        if now - self.renewed < float(getattr(self.layer, "group_expiry", 86400)) / 2:
            return
        self.renewed = now
        for tenant, room in list(self.rooms):
            with tenants.activate(tenant):
                await self.layer.group_add(dispatch.count_group(room), self.channel)

    async def refresh(self, session: Any, room: str) -> None:
        """The count of ``room`` now, to ``session`` alone (a join, a recovery), with
        ``counted``: does its own user count in it while they show online? Not where
        ``AUDIENCE`` hides them from a signed-out visitor, as whom the room is counted (a page
        that shows the others, ``data-presence-others``, takes one off only if so)."""
        from .. import presence  # the front door imports this module

        key = (session.tenant, room)
        frame = await self._frame(key, session.viewer)
        shown = {"type": "presence.update", "user": session.user_id, "state": "online"}
        with tenants.activate(session.tenant):
            seen = await presence.aredact_event(shown, viewer=presence.ANONYMOUS)
        if session in self.rooms.get(key, ()):  # not left meanwhile
            await session.send({**frame, "counted": seen is not None})

    async def discard(self, session: Any, room: str) -> None:
        key = (session.tenant, room)
        members = self.rooms.get(key)
        if members is None or session not in members:
            return
        members.discard(session)
        if not members:
            del self.rooms[key]
            self.sent.pop(key, None)
            self.dirty.discard(key)
            with tenants.activate(session.tenant):
                try:
                    await self.layer.group_discard(dispatch.count_group(room), self.channel)
                except UNAVAILABLE as exc:
                    log_outage(exc)  # a stale member costs a dropped mark, and expires

    async def _receive(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except UNAVAILABLE as exc:
                log_outage(exc)
                await asyncio.sleep(1)
                continue
            if message.get("type") != "presence.count":
                continue
            key = (message.get("tenant"), str(message.get("room")))
            if key in self.rooms:
                self.dirty.add(key)
                if self.ticker is None or self.ticker.done():
                    self.ticker = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        """The first change of a quiet room goes at once, the next ones a tick apart."""
        while self.dirty:
            batch, self.dirty = self.dirty, set()
            for key in batch:
                try:
                    await self._send(key)
                except UNAVAILABLE as exc:
                    log_outage(exc, "a room's count not sent")
            await asyncio.sleep(membership_tick())

    async def _send(self, key: tuple[str | None, str]) -> None:
        members = self.rooms.get(key)
        if not members:
            return
        frame = await self._frame(key, None)
        if self.sent.get(key) == frame:
            return
        self.sent[key] = frame
        sampled = int(conf.get("COUNT_SAMPLE") or 0) > 0
        for session in list(members):
            # Under an AUDIENCE policy a sample is read for each viewer (the one redaction).
            shown = frame
            if sampled and session.viewer.filtered:
                shown = await self._frame(key, session.viewer)
            # Still a member: one that left (or was revoked) while the reads ran gets nothing.
            if not session.closed and session in members:
                await session.send(shown)

    async def _frame(self, key: tuple[str | None, str], viewer: Any) -> dict[str, Any]:
        """A room's ``presence.count``: its visible members as a signed-out visitor counts them
        (the same number for every member) and, with ``COUNT_SAMPLE``, the first of them."""
        from .. import presence  # the front door imports this module

        tenant, room = key
        size = max(0, int(conf.get("COUNT_SAMPLE") or 0))
        # Without a policy every member reads a sample alike (its members are online: no
        # last seen to withhold), so one read serves them all.
        reader = viewer if viewer is not None and viewer.filtered else presence.ANONYMOUS
        with tenants.activate(tenant):
            count, sample = await presence.aroom_sample(room, size, viewer=reader)
            self.reads += 1
        frame: dict[str, Any] = {"type": "presence.count", "room": room, "count": count}
        if size:
            frame["sample"] = [p.as_dict() for p in sample]
        return frame


_counts = per_loop(RoomCounts)


def get_counts() -> RoomCounts:
    """The count-only rooms of the running event loop (one per process)."""
    return _counts()
