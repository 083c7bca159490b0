"""A room's events reach a process once, and its sockets in the room as frames encoded once.

channels-redis hands a group's message to every channel of the group in the process, and each
decodes it; a consumer then redacts and encodes it for its socket: a room of 5,000 paid that
5,000 times an event. Here each process listens to a room's group (``dispatch.room_group``)
with one channel of its own, a :class:`RoomFeed`, while it has a connection in the room. The
feed decodes an event once, redacts it once per class of viewers (``presence.aredact_event_
classes``: the front door's one rule; a viewer whose ``AUDIENCE`` answer differs is a class of
its own), encodes each class's frame once, and hands it to each local connection of the class
(:class:`~presence_app.realtime.delivery.Writer`: in order, never waiting on a slow socket).

What stays a connection's own is applied per connection, cheaply: a connection that accepted
``presence.diff`` gets the room's changes a tick at a time (one :class:`~presence_app.realtime.
roomstate.Diffs` per room, not per socket), without its own join; one that did not gets an
event a frame; an update reaches a connection once whatever groups bring it (its
``RecentUpdates``); nobody is told of their own typing or their own room state; typing and room
states of a user known offline (to the room, or to the connection) are dropped. Room states go
out a frame per slot (one :class:`~presence_app.realtime.roomstate.Outbox` per room), to the
connections in turns (:class:`~presence_app.realtime.roomstate.Turns`: a k-th of a big room's
connections a slot).

A connection is held while its snapshot of the room is read and sent (:meth:`RoomFeeds.
snapshot`): what the feed hands it meanwhile follows the snapshot, never precedes it. The
joiners of one tick share the snapshot (:class:`Joiners`): the room is read once
(``presence.aroom_read``) and encoded once per class of viewers (``presence.aroom_view``: those
the one rule shows the same members), while no frame of the room has gone out since the read
began: a joiner held from before that frame gets it after the snapshot, and the snapshot plus
what follows is the room.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from .. import conf, presence
from ..core import dispatch, tenants
from ..core.tasks import per_loop, spawn
from ..failopen import log_outage
from ..store import ONLINE_STATES, UNAVAILABLE
from . import protocol, roomstate
from .subscriptions import Hidden

logger = logging.getLogger("presence_app")

#: Its own states in which a connection's typing and room states may go out.
PUBLISHING_STATES = ONLINE_STATES - {"invisible"}
#: The users a feed remembers as offline (their late typing and room states are dropped).
HIDDEN_USERS = 8192

Key = tuple[str | None, str]  # (tenant, room)


async def _as_sent(events: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """A feed's :class:`~roomstate.Diffs` keeps events as sent: each class is redacted apart."""
    return list(events)


def _always(room: str) -> bool:
    return True


def _stretch(members: Any) -> int:
    """Slots between two room-state frames to a connection of a feed here
    (``ROOM_STATE_FRAMES``): its turns (:class:`~presence_app.realtime.roomstate.Turns`)."""
    return roomstate.stretch(len(members.batched) + len(members.each))


def _ticks(batched: dict[Any, None]) -> int:
    """Membership ticks a slot of a feed's diffs lasts (``MEMBERSHIP_FRAMES``): more as the
    room's diff-accepting sockets in this process grow."""
    return roomstate.membership_stretch(len(batched))


async def _nowhere(frame: dict[str, Any], *args: Any) -> None:
    """A closed feed's sends (its bound methods were a cycle: the feed, its Diffs, the feed)."""


def without_own_join(session: Any, frame: dict[str, Any]) -> dict[str, Any] | None:
    """A diff as ``session`` gets it: not its own join (the snapshot it just got lists it)."""
    joined = [m for m in frame["joined"] if str(m.get("user")) != session.user_id]
    return {**frame, "joined": joined} if joined or frame["left"] else None


def own_states(session: Any, frame: dict[str, Any]) -> dict[str, Any] | None:
    """Room states as ``session`` gets them: not its own, nor those of users it knows offline."""
    mine = (session.user_id, session.public_id)
    kept = [
        st
        for st in frame["states"]
        if (str(st.get("user")), st.get("conn")) != mine
        and (st.get("data") is None or str(st.get("user")) not in session.hidden)
    ]
    return {**frame, "states": kept} if kept else None


class Members:
    """A feed's local connections: those that accepted ``presence.diff`` and the others, and
    those held while their snapshot is on its way (what comes meanwhile waits for it)."""

    def __init__(self) -> None:
        self.batched: dict[Any, None] = {}  # connections that accepted presence.diff
        self.each: dict[Any, None] = {}  # those that take an event a frame
        self.by_conn: dict[str, Any] = {}  # public connection id -> connection
        self.held: dict[Any, list[tuple[dict[str, Any], str | None]]] = {}
        self.holds: dict[Any, int] = {}
        self.entering: set[Any] = set()  # held by their join, until their snapshot
        self.seq: dict[Any, int] = {}  # connection -> its place in the turns of room states
        self.placed = 0

    def __contains__(self, session: Any) -> bool:
        return session in self.batched or session in self.each

    def __bool__(self) -> bool:
        return bool(self.batched or self.each)

    def all(self) -> list[Any]:
        return [*self.batched, *self.each]

    def in_turn(self, slot: int, k: int) -> list[Any]:
        """The connections whose turn slot ``slot`` is, of k turns (every one when k is 1)."""
        if k <= 1:
            return self.all()
        return [s for s in self.all() if self.seq.get(s, 0) % k == slot % k]

    def place(self, session: Any) -> None:
        """Among the batched or the others, as the connection accepts (its ``hello``)."""
        self.batched.pop(session, None)
        self.each.pop(session, None)
        (self.batched if session.batched else self.each)[session] = None
        self.by_conn[session.public_id] = session
        if session not in self.seq:
            self.seq[session], self.placed = self.placed, self.placed + 1

    def remove(self, session: Any) -> None:
        self.batched.pop(session, None)
        self.each.pop(session, None)
        self.held.pop(session, None)
        self.holds.pop(session, None)
        self.entering.discard(session)
        self.seq.pop(session, None)
        if self.by_conn.get(session.public_id) is session:
            del self.by_conn[session.public_id]

    def hold(self, session: Any, *, entering: bool = False) -> None:
        """What the feed hands ``session`` waits until :meth:`release` (its snapshot)."""
        if session in self.entering and not entering:
            self.entering.discard(session)  # the hold its join took is this snapshot's
            return
        self.held.setdefault(session, [])
        self.holds[session] = self.holds.get(session, 0) + 1
        if entering:
            self.entering.add(session)

    def release(self, session: Any) -> None:
        """``session``'s snapshot is sent: what came meanwhile follows it."""
        self.holds[session] = self.holds.get(session, 1) - 1
        if self.holds[session] > 0:
            return
        del self.holds[session]
        for frame, text in self.held.pop(session, ()):
            session.writer.put(frame, text)

    def deliver(self, session: Any, frame: dict[str, Any], text: str | None) -> None:
        held = self.held.get(session)
        if held is not None:
            held.append((frame, text))
        else:
            session.writer.put(frame, text)


def snapshot_frames(
    room: str,
    ids: list[str],
    presences: dict[str, Any],
    states: list[dict[str, Any]],
    mine: tuple[str, str] | None,
) -> list[dict[str, Any]]:
    """A room's ``presence.state`` frames (``page`` from 0, ``more`` true on every one) from
    its members' ``ids`` in order and their ``presences``: pages of ``ROOM_SNAPSHOT_PAGE`` ids
    cut at about ``ROOM_SNAPSHOT_BYTES`` (:func:`protocol.byte_pages`), online members only,
    with the states of the members a page shows (not ``mine``, the connection's own)."""
    size = max(1, int(conf.get("ROOM_SNAPSHOT_PAGE")))
    frames: list[dict[str, Any]] = []
    for start in range(0, len(ids), size) or range(1):
        shown = [p for p in (presences[u] for u in ids[start : start + size]) if p.is_online]
        online = {p.user_id for p in shown}
        page_states = [
            st for st in states if st["user"] in online and (st["user"], st["conn"]) != mine
        ]
        for members, theirs in protocol.byte_pages(shown, page_states):
            frames.append(
                protocol.state_frame(members, room=room, page=len(frames), more=True,
                                     states=theirs)
            )  # fmt: skip
    return frames


Pages = list[tuple[dict[str, Any], str]]  # frames and their texts


class Shared:
    """One read of a room (``presence.RoomRead``) for the joiners of one tick, and its frames
    encoded once per class of viewers (the ids ``presence.aroom_view`` shows them)."""

    def __init__(self, stamp: tuple[int, int], read: asyncio.Task[Any]) -> None:
        self.stamp = stamp  # the feed's frames sent and events heard when the read began
        self.read = read
        self.began = asyncio.get_running_loop().time()
        # a class (its ids; None: all) -> its pages, the last one closing them, its offline ids
        self.classes: dict[
            frozenset[str] | None, tuple[Pages, tuple[dict[str, Any], str] | None, list[str]]
        ] = {}


class Joiners:
    """The snapshots of a room's joiners in this process: one read shared while it is valid,
    i.e. for a slot of its diffs at most, while no frame of the room (a diff, an event, a slot
    of room states) has gone out since it began. A joiner is in the feed (held) before it
    asks, so a change the read may lack reaches it after its snapshot, in a frame that had not
    gone out yet."""

    def __init__(self, feed: RoomFeed) -> None:
        self.tenant, self.room = feed.tenant, feed.room
        self.sent = 0  # frames of the room handed out: a read begun before one is stale
        # membership events heard: for a joiner that takes an event a frame (not presence.diff)
        # a read begun before one is stale (the others got it, not held for a tick)
        self.heard = 0
        self.shared: Shared | None = None
        self.reads = 0  # reads made (the tests' and the bench's measure)
        self.ticks = feed.diffs.stretch  # membership ticks a slot of the room's diffs lasts

    def slot(self) -> float:
        """Seconds a slot of the room's diffs lasts here: a read is shared that long at most."""
        return roomstate.membership_tick() * max(1, self.ticks() if self.ticks else 1)

    def _read(self, batched: bool) -> Shared:
        shared = self.shared
        if (
            shared is None
            # a slot's joiners only: a change the room makes no frame of (connections put back
            # after Redis restarted empty, another process's recovery) is never read otherwise
            or asyncio.get_running_loop().time() - shared.began > self.slot()
            or shared.stamp[0] != self.sent
            or (not batched and shared.stamp[1] != self.heard)
            or (shared.read.done() and (shared.read.cancelled() or shared.read.exception()))
        ):
            self.reads += 1
            with tenants.activate(self.tenant):
                task = asyncio.get_running_loop().create_task(presence.aroom_read(self.room))
            shared = self.shared = Shared((self.sent, self.heard), task)
        return shared

    async def send(self, session: Any) -> None:
        """``session``'s snapshot of the room: the pages of its class, then its own entry
        where the read lacks it (it joined after the read began). Its own read where the read
        shows its user otherwise than they see themself (invisible: offline to the others) or
        holds its own connection's state: a snapshot of its own, as one viewer's read was."""
        shared = self._read(session.batched)
        read = await asyncio.shield(shared.read)
        view = await presence.aroom_view(read, session.viewer)
        own, mine = session.user_id, (session.user_id, session.public_id)
        ids = read.ids if view is None else [u for u in read.ids if u in view]
        if own in read.presences and (not read.presences[own].is_online or mine in read.conns):
            found = await presence.aget_many([own], viewer=session.viewer, activity=True)
            presences = {**read.presences, own: found[own]}
            self._learn(session, ids, presences, ids)
            frames = snapshot_frames(self.room, ids, presences, self._states(read, view), mine)
            frames[-1]["more"] = False
            for frame in frames:
                await session.send(frame)
            return
        pages, closing, offline = self._class(shared, read, view, ids)
        self._learn(session, ids, read.presences, offline)
        if closing is not None and own in read.presences:  # as its user sees themself
            for frame, text in pages[:-1]:
                await session.writer.send(frame, text)
            await session.writer.send(*closing)
            return
        found = await presence.aget_many([own], viewer=session.viewer, activity=True)
        me = found[own]
        session.hidden.learn(own, me.state)
        for frame, text in pages[:-1]:
            await session.writer.send(frame, text)
        for frame, maybe in self._closing(pages, closing, me):
            await session.writer.send(frame, maybe)

    def _closing(
        self, pages: Pages, closing: tuple[dict[str, Any], str] | None, me: Any
    ) -> list[tuple[dict[str, Any], str | None]]:
        """The last frames of a joiner missing from the read (it joined after the read began):
        the class' last page with its own entry added, spliced into the text (the members
        come last), or that page and one of its own when it is full."""
        entry = [me] if me.is_online else []
        if closing is None:
            return [(protocol.state_frame(entry, room=self.room, page=0, more=False, states=[]),
                     None)]  # fmt: skip
        last, text = closing
        members = last["members"]
        full = len(text) > int(conf.get("ROOM_SNAPSHOT_BYTES"))
        if full or len(members) + 1 > int(conf.get("ROOM_SNAPSHOT_PAGE")):
            own = protocol.state_frame(entry, room=self.room, page=len(pages), more=False,
                                       states=[])  # fmt: skip
            return [pages[-1], (own, None)]
        if not entry:
            return [(last, text)]
        added = me.as_dict()
        text = f"{text[:-2]}{', ' if members else ''}{json.dumps(added)}]}}"
        return [({**last, "members": [*members, added]}, text)]

    @staticmethod
    def _states(read: Any, view: frozenset[str] | None) -> list[dict[str, Any]]:
        return read.states if view is None else [st for st in read.states if st["user"] in view]

    def _class(
        self, shared: Shared, read: Any, view: frozenset[str] | None, ids: list[str]
    ) -> tuple[Pages, tuple[dict[str, Any], str] | None, list[str]]:
        """The frames of ``view``'s class, encoded once (built whole without an await, then
        kept for the next joiner of the class)."""
        known = shared.classes.get(view)
        if known is None:
            offline = [u for u in ids if read.presences[u].state == "offline"]
            if not ids:
                known = ([], None, offline)
            else:
                states = self._states(read, view)
                frames = snapshot_frames(self.room, ids, read.presences, states, None)
                last = {**frames[-1], "more": False}
                pages = [(f, json.dumps(f)) for f in frames]
                known = (pages, (last, json.dumps(last)), offline)
            shared.classes[view] = known
        return known

    @staticmethod
    def _learn(session: Any, ids: list[str], presences: dict[str, Any], offline: list[str]) -> None:
        """What the snapshot tells ``session`` of who is offline, as reading it one by one
        would (with nothing known yet, only the offline ones change anything)."""
        hidden = session.hidden
        for uid in offline if not hidden.users else ids:
            hidden.learn(uid, presences[uid].state)


class RoomFeed:
    """One room's events in this process, for its local connections (``members``)."""

    def __init__(self, key: Key, layer: Any) -> None:
        self.key = key
        self.tenant, self.room = key
        self.layer = layer
        self.channel: str | None = None
        self.opening: asyncio.Task[None] | None = None
        self.task: asyncio.Task[None] | None = None
        self.hidden = Hidden(HIDDEN_USERS)
        self.members = Members()
        ticks = partial(_ticks, self.members.batched)  # a slot of its diffs: MEMBERSHIP_FRAMES
        self.diffs = roomstate.Diffs(self._send_diff, _as_sent, _always, ticks)
        self.turns = roomstate.Turns(self._send_states, partial(_stretch, self.members))
        self.outbox = roomstate.Outbox(self.turns.add)
        self.joiners = Joiners(self)

    # -- life --------------------------------------------------------------------------------
    async def open(self) -> None:
        with tenants.activate(self.tenant):
            self.channel = await self.layer.new_channel()
            await self.layer.group_add(dispatch.room_group(self.room), self.channel)
        self.task = asyncio.get_running_loop().create_task(self._receive())

    async def readd(self) -> None:
        """Into the group again (a layer that forgets groups: ``group_expiry``, a restart)."""
        if self.channel is not None:
            with tenants.activate(self.tenant):
                await self.layer.group_add(dispatch.room_group(self.room), self.channel)

    async def close(self) -> None:
        self.diffs.close()
        self.outbox.close()
        self.turns.close()
        self.diffs.send = self.outbox.send = self.turns.deliver = _nowhere
        if self.opening is not None:
            await asyncio.wait([self.opening])
        if self.task is not None:
            self.task.cancel()  # its waiting receive lets the channel go (the pub/sub layer)
        if self.channel is not None:
            with tenants.activate(self.tenant):
                try:
                    await self.layer.group_discard(dispatch.room_group(self.room), self.channel)
                except UNAVAILABLE as exc:
                    log_outage(exc)  # a stale member costs a dropped message, and expires

    # -- events ------------------------------------------------------------------------------
    async def _receive(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except UNAVAILABLE as exc:
                log_outage(exc)
                await asyncio.sleep(1)
                continue
            try:
                with tenants.activate(self.tenant):
                    await self.handle(message)
            except UNAVAILABLE as exc:
                log_outage(exc, "a room event not relayed")
            except Exception:
                logger.exception("presence: a room event failed: %r", message.get("type"))

    async def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "presence.roomstate":
            states = [
                st
                for st in event.get("states") or ()
                if isinstance(st, dict)
                # a state (not its removal) of a user known offline: it followed their offline
                and (st.get("data") is None or str(st.get("user")) not in self.hidden)
            ]
            if states:
                await self.outbox.add(self.room, states)
        elif kind == "presence.typing":
            await self._typing(event)
        elif kind in roomstate.DIFF_EVENTS:
            self.hidden.learn(event.get("user", ""), event.get("state"))
            if kind != "presence.update" and event.get("room") != self.room:
                return
            self.joiners.heard += 1
            if self.members.batched:
                await self.diffs.add(event)
            if self.members.each:
                await self._each(event)

    async def _each(self, event: dict[str, Any]) -> None:
        """An event a frame, to the connections that did not accept ``presence.diff``."""
        self.joiners.sent += 1  # (before the list of its receivers is taken)
        sessions = list(self.members.each)
        update = event.get("type") == "presence.update"
        for shown, indices in await presence.aredact_event_classes(
            [event], [s.viewer for s in sessions]
        ):
            frame = shown[0]
            if frame is None:
                continue
            text = json.dumps(frame)
            for i in indices:
                s = sessions[i]
                if not update or s.recent.first_time(event):  # once, whatever group brings it
                    self.members.deliver(s, frame, text)

    async def ahead(self) -> None:
        """A typing or a room state is about to go out at once: the room's joins and leaves
        held for the tick go first (a member's typing or cursor must not reach a browser before
        the diff that shows them there), and a flush on its way ends first."""
        if self.diffs.rooms or self.diffs.lock.locked():
            await self.diffs.flush()

    async def _typing(self, event: dict[str, Any]) -> None:
        user, sender = str(event.get("user", "")), event.get("sender")
        if user in self.hidden or event.get("state") not in PUBLISHING_STATES:
            return  # whatever its sender believed: offline or invisible here
        if self.members.batched:
            await self.ahead()
        sessions = [
            s for s in self.members.all() if s.channel_name != sender and user not in s.hidden
        ]  # not echoed to the typist
        shown_event = {k: v for k, v in event.items() if k != "sender"}
        classes = await presence.aredact_event_classes([shown_event], [s.viewer for s in sessions])
        if user in self.hidden:
            return  # its offline came while it waited (ahead, the redaction) and went first
        for shown, indices in classes:
            if shown[0] is not None:
                text = json.dumps(shown[0])
                for i in indices:
                    if user not in sessions[i].hidden:  # (learned meanwhile too)
                        self.members.deliver(sessions[i], shown[0], text)

    async def _send_diff(self, frame: dict[str, Any]) -> None:
        """A tick's ``presence.diff`` (as sent, unredacted) to the batched connections: one
        frame a class of viewers; a connection's own join left out of its own."""
        self.joiners.sent += 1  # (before the list of its receivers is taken)
        sessions = list(self.members.batched)
        updated = "updated" in frame
        if updated:  # every room's joins and leaves held before it go first, as with one Diffs
            await get_feeds().ahead(self)
        entries = frame["updated"] if updated else [*frame["joined"], *frame["left"]]
        joiners = set() if updated else {str(m.get("user")) for m in frame["joined"]}
        split = 0 if updated else len(frame["joined"])
        for shown, indices in await presence.aredact_event_classes(
            entries, [s.viewer for s in sessions]
        ):
            if updated:
                out = {"type": "presence.diff", "updated": [m for m in shown if m is not None]}
                if not out["updated"]:
                    continue
            else:
                joined = [m for m in shown[:split] if m is not None]
                left = [m for m in shown[split:] if m is not None]
                if not joined and not left:
                    continue
                out = {"type": "presence.diff", "room": self.room, "joined": joined, "left": left}
            text = json.dumps(out)
            for i in indices:
                s = sessions[i]
                if updated:
                    fresh = [s.recent.first_time(e) for e in entries]  # each one marked
                    if not any(fresh):
                        continue  # every one of them came already (the watchers' group)
                elif s.user_id in joiners:
                    if (mine := without_own_join(s, out)) is not None:
                        self.members.deliver(s, mine, None)
                    continue
                self.members.deliver(s, out, text)

    async def _send_states(self, frame: dict[str, Any], slot: int = 0, k: int = 1) -> None:
        """Slot ``slot``'s room states to the connections whose turn it is (of k): one frame a
        class of viewers; a connection's own state, and those of users it knows offline, dropped."""
        self.joiners.sent += 1  # (before the list of its receivers is taken)
        if self.members.batched:
            await self.ahead()
        sessions = self.members.in_turn(slot, k)
        states = frame["states"]
        classes = await presence.aredact_state_classes(states, [s.viewer for s in sessions])
        for shown, indices in classes:
            # A state taken before its user's offline waited here for its slot (or for the
            # awaits above) while the offline arrived and went out: it must not follow it.
            shown = [
                st
                for st in shown
                if st.get("data") is None or str(st.get("user")) not in self.hidden
            ]
            if not shown:
                continue
            out = {"type": "presence.roomstate", "room": self.room, "states": shown}
            owners = {self.members.by_conn.get(st.get("conn")) for st in shown}
            text: str | None = None
            for i in indices:
                s = sessions[i]
                if s in owners or s.hidden.users:
                    if (mine := own_states(s, out)) is not None:
                        self.members.deliver(s, mine, None)
                    continue
                if text is None:
                    text = json.dumps(out)
                self.members.deliver(s, out, text)


class RoomFeeds:
    """The feeds of the rooms this process's connections are in (one per process)."""

    def __init__(self) -> None:
        self.feeds: dict[Key, RoomFeed] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.renewed = 0.0

    def _of(self, session: Any, room: str) -> RoomFeed | None:
        """The feed of ``room`` ``session`` is in, if it is."""
        feed = self.feeds.get((session.tenant, room))
        return feed if feed is not None and session in feed.members else None

    async def enter(self, session: Any, room: str, *, held: bool = True) -> None:
        """``session`` is joining ``room``: the room's events reach it from now on, ``held``
        until its snapshot is sent (:meth:`snapshot`). Call before the store's join."""
        key = (session.tenant, room)
        feed = self.feeds.get(key)
        if feed is None:
            feed = self.feeds[key] = RoomFeed(key, session.layer)
            feed.opening = asyncio.get_running_loop().create_task(feed.open())
            self.renewed = self.renewed or asyncio.get_running_loop().time()
        feed.members.place(session)
        if held:
            feed.members.hold(session, entering=True)
        try:
            await asyncio.shield(feed.opening)  # type: ignore[arg-type]
        except BaseException:
            self.exit(session, room)
            raise

    def exit(self, session: Any, room: str) -> None:
        """``session`` left ``room``: nothing more of it reaches it; the last one out closes
        the feed."""
        key = (session.tenant, room)
        feed = self.feeds.get(key)
        if feed is None:
            return
        feed.members.remove(session)
        if not feed.members:
            del self.feeds[key]
            spawn(self.tasks, feed.close())

    @asynccontextmanager
    async def snapshot(self, session: Any, room: str) -> AsyncIterator[None]:
        """While ``session``'s snapshot of ``room`` is read and sent: the room's events are
        held for it, and follow the snapshot."""
        feed = self._of(session, room)
        if feed is None:
            yield
            return
        feed.members.hold(session)
        try:
            yield
        finally:
            if self._of(session, room) is feed:
                feed.members.release(session)

    async def send_snapshot(self, session: Any, room: str) -> bool:
        """Sends ``session`` its snapshot of ``room`` from the read its feed shares among the
        joiners of a tick (:class:`Joiners`); False if it is not in the room's feed."""
        feed = self._of(session, room)
        if feed is None:
            return False
        await feed.joiners.send(session)
        return True

    def accepted(self, session: Any) -> None:
        """``session`` changed what it accepts (``presence.diff`` or not)."""
        for room in session.rooms:
            feed = self._of(session, room)
            if feed is not None:
                feed.members.place(session)

    async def ahead(self, caller: RoomFeed | None = None) -> None:
        """An update is about to go out to batched connections (a room feed's, a connection's
        own from its watch list): the joins and leaves every other feed holds go first, so a
        frame about a user never overtakes a change queued before it (one connection's
        ``presence.diff`` frames keep the order its changes came in, as one ``Diffs`` did)."""
        for feed in list(self.feeds.values()):
            if feed is not caller and feed.diffs.rooms and not feed.diffs.lock.locked():
                with tenants.activate(feed.tenant):  # its viewers' workspace, not the caller's
                    await feed.diffs.flush()

    async def readd(self, session: Any) -> None:
        """The groups of ``session``'s rooms' feeds again (its lease taken back: the layer may
        have lost them with Redis)."""
        for room in sorted(session.rooms):
            feed = self._of(session, room)
            if feed is not None:
                await feed.readd()

    async def renew(self) -> None:
        """Every feed's group again before the layer's ``group_expiry`` forgets it (the
        connections' heartbeats call this; it does the work twice a ``group_expiry``)."""
        if not self.feeds:
            return
        loop = asyncio.get_running_loop()
        layer = next(iter(self.feeds.values())).layer
        if loop.time() - self.renewed < float(getattr(layer, "group_expiry", 86400)) / 2:
            return
        self.renewed = loop.time()
        for feed in list(self.feeds.values()):
            await feed.readd()


_feeds = per_loop(RoomFeeds)


def get_feeds() -> RoomFeeds:
    """The room feeds of the running event loop (one per process)."""
    return _feeds()
