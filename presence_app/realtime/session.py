"""One connection's presence, whatever carries it: a WebSocket today, any stream of events.

A :class:`PresenceSession` holds what a connection owns — its lease, the rooms it joined, the
users it watches, its channel-layer groups — and does what a connection does: open, beat (through
the process' coalescer), join, leave, set status, type, watch, recover a lost lease, close. It
speaks to the browser only through the ``send`` coroutine it is given, and to Redis only through
the front door (:mod:`presence_app.presence`). The WebSocket consumer and the consumer mixin
(:mod:`presence_app.consumers`) wrap it; :mod:`presence_app.realtime.frames` maps client frames
onto it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from .. import conf, presence
from ..core import dispatch, rules, tenants
from ..core.limits import Throttle
from ..core.tasks import spawn
from ..core.tenants import in_tenant
from ..failopen import log_outage
from ..jobs.sweeper import ensure_sweeper
from ..store import UNAVAILABLE, TooManyConnections, UnknownConnection
from . import delivery, protocol, roomstate
from .coalescer import disconnect, get_coalescer, leave_later
from .collector import collector
from .feeds import PUBLISHING_STATES, get_feeds
from .liveness import Liveness
from .protocol import ConnectionLimit, FrameError
from .subscriptions import Hidden, RecentUpdates, Subscriptions

logger = logging.getLogger("presence_app")

Send = Callable[[dict[str, Any]], Awaitable[None]]
#: How often a connection may warn its browser about an outage found in the background.
OUTAGE_NOTICE_INTERVAL = 30.0
#: The AUDIENCE answers one connection remembers (the least recently used go first).
AUDIENCE_ANSWERS = 512
#: The refusal of a typing or a room state in a count-only room (``COUNT_ONLY_ROOMS``).
COUNT_ONLY = "This room shows its count only: nobody there learns who is in it."


def activity_interval(settings: dict[str, Any]) -> float:
    """How often a connection writes activity: often enough that idle is never announced wrongly."""
    return min(float(settings["TOUCH_INTERVAL"]), float(settings["IDLE_AFTER"]) / 2)


async def _sent_nowhere(frame: dict[str, Any]) -> None:
    """A closed session's ``send``."""


async def _redacted_away(events: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """A closed session's redaction of its membership diffs: nothing is shown."""
    return [None] * len(events)


class PresenceSession:
    """The presence of one connection of ``user``; events go out through ``send``. ``tenant``
    (default: the current one) is the key space it lives in for its whole life. ``end`` closes
    the transport: the session ends a connection that stopped beating (realtime.liveness).
    ``send_text``: the transport's send of a frame already encoded (JSON text), which a room's
    feed encodes once for all its sockets; without it they get the frame itself."""

    def __init__(
        self,
        user: Any,
        *,
        layer: Any,
        channel_name: str,
        send: Send,
        device: str | None = None,
        tenant: str | None = None,
        end: Callable[[], Awaitable[None]] | None = None,
        send_text: delivery.SendText | None = None,
    ) -> None:
        s = conf.get_settings()
        self.tenant = tenants.check(tenant) if tenant is not None else tenants.current()
        self.user = user
        self.user_id = rules.user_id(user)
        # Short and random: it is part of every lease member in Redis.
        self.conn_id = secrets.token_urlsafe(9)
        self.layer = layer
        self.channel_name = channel_name
        # Every frame goes out through the writer, in order: the session's own (send) and those
        # a room's feed hands over (writer.put).
        self.writer = delivery.Writer(send, send_text)
        self.send = self.writer.send
        self.device = device
        self.rooms: set[str] = set()
        self.owed: set[str] = set()  # unasked joins an outage refused (owe)
        # Rooms whose join met an outage: Redis may have done it (a stalled Redis answers after
        # the call timed out) and nobody was told; the next join of it tells the room again.
        self.unsure: set[str] = set()
        self.watched: set[str] = set()
        # Unknown (None) until read from the store: nothing is published meanwhile (a socket
        # opened while Redis blinked must not believe its invisible user online).
        self.own_state: str | None = None
        self.hidden = Hidden()  # users known offline or invisible: their typing is dropped
        self.closed = False
        self.recover_retried = False
        self.recovery_due = self.recovering = False
        self.lock = asyncio.Lock()
        self.tasks: set[asyncio.Task[None]] = set()
        self.activity_throttle = Throttle(activity_interval(s))
        self.typing_throttle = Throttle(
            s["TYPING_THROTTLE"], max_keys=s["MAX_ROOMS_PER_CONNECTION"]
        )
        self.outage_notice = Throttle(OUTAGE_NOTICE_INTERVAL)
        self.groups = Subscriptions(layer, channel_name, self.user_id)
        # Who reads through this connection, with the AUDIENCE answers it got, for a while.
        self.viewer = presence.viewer(self.user_id, remember=AUDIENCE_ANSWERS)
        self.recent = RecentUpdates()  # an update comes once per group it concerns
        self.outbox = roomstate.Outbox(self.send)  # others' room states: a frame per tick
        # Joins, leaves and updates as presence.diff frames, once per tick, for a client that
        # accepts them (its hello frame): a storm of joins costs a frame per tick, not a join.
        self.batched = False
        self.diffs = roomstate.Diffs(self._send_diff, self._redact_events, self.rooms.__contains__)
        self.outbox.ahead = self.diffs.ahead  # a room state after the diff showing its member
        self.published: set[str] = set()  # rooms this connection set a state in
        self.end = end
        self.liveness: Liveness | None = None  # its deadlines, from open()

    @property
    def public_id(self) -> str:
        """This connection as others see it in room states (not its id: that drives it)."""
        return roomstate.public_id(self.conn_id)

    @property
    def publishes(self) -> bool:
        """May this connection's typing and room state go out? Only once its own state is
        known (read from the store), and never from an invisible (or offline) user."""
        return self.own_state in PUBLISHING_STATES

    async def read_own_state(self) -> str | None:
        """The user's own state read from the store (None: Redis did not answer; it stays
        unknown, and nothing is published until a later read or a ``self`` event)."""
        try:
            me = await presence.aget(self.user_id, viewer=self.viewer)
        except UNAVAILABLE as exc:
            log_outage(exc)
            return None
        await self.own_state_is(me.state)
        return me.state

    async def own_state_is(self, state: str | None) -> None:
        """The user's own state is ``state`` now; gone invisible, its room states go."""
        self.own_state = state
        if state is not None and not self.publishes and self.published:
            try:
                await self.clear_states(self.published)
            except UNAVAILABLE as exc:
                log_outage(exc)  # the room's members got the offline, which drops them

    # -- life --------------------------------------------------------------------------------
    @in_tenant
    async def open(self) -> dict[str, Any]:
        """Takes the lease and the groups; returns the ``hello`` frame to send first. Raises
        :class:`~presence_app.realtime.protocol.ConnectionLimit`, having taken nothing, when the
        user holds ``MAX_CONNECTIONS_PER_USER`` connections already."""
        s, me = conf.get_settings(), None
        limit = int(s["MAX_CONNECTIONS_PER_USER"] or 0)
        try:
            await self.groups.add_all(self.rooms, self.watched)
            # the store counts the user's connections as it takes this one: two opens at once
            # cannot both pass the limit
            await presence.aconnect(
                self.conn_id, self.user_id, device=self.device, max_connections=limit
            )
            me = await presence.aget(self.user_id, viewer=self.viewer)
            self.own_state = me.state
        except TooManyConnections:
            await self.groups.discard(self.groups.all(self.rooms, self.watched))
            self.closed = True  # nothing else taken, nothing to close
            self.send = self.outbox.send = self.diffs.send = _sent_nowhere
            self.writer.close()
            self.diffs.redact = _redacted_away  # it was this session's: a cycle
            raise ConnectionLimit(limit) from None
        except UNAVAILABLE as exc:
            await self.unavailable(exc)  # no lease: the first heartbeat finds it missing
        ensure_sweeper()
        collector.opened()
        get_coalescer().hold(self)  # the process's lease kept while this connection is open
        self.liveness = Liveness(self, self.end)
        return protocol.hello(self.user_id, me, s, activity_interval(s))

    @in_tenant
    async def close(self, *, forgotten: bool = False) -> None:
        """A clean close: the lease is cut to the grace; the rooms hear of it after that.
        ``forgotten``: the user was erased (:func:`presence.forget`), nothing is left to cut."""
        if self.closed:
            return
        self.closed = True
        collector.closed()
        if self.liveness is not None:
            self.liveness.stop()
        get_coalescer().forget(self)
        self.outbox.close()
        self.diffs.close()
        for room in self.rooms:
            get_feeds().exit(self, room)  # nothing more of its rooms reaches it
        for task in self.tasks:
            task.cancel()
        try:
            async with self.lock:
                await self.uncount(self.rooms)
                try:
                    # Its states go now, not after the grace: a reload comes back as a new
                    # connection, whose state would otherwise show twice meanwhile.
                    await self.clear_states(self.published)
                except UNAVAILABLE as exc:
                    log_outage(exc)  # they then expire by themselves
                if not forgotten:
                    await disconnect(self.conn_id, self.user_id, tenant=self.tenant)
                await self.groups.discard(self.groups.all(self.rooms, self.watched))
        finally:
            # The connection (a consumer, a stream) holds this session and the session its
            # send: a cycle, which only the collector frees, once it walks the old generation
            # a connection of minutes has reached. Nothing is sent once closed: let go, and an
            # ended connection is freed at once (the soak's RSS grew with every one kept).
            self.send = self.outbox.send = self.diffs.send = _sent_nowhere
            self.writer.close()
            self.diffs.redact = _redacted_away  # it was this session's: a cycle
            self.end, self.liveness = None, None  # the same for the transport's close

    # -- what a connection does (frames, REST calls) ------------------------------------------
    @in_tenant
    async def heartbeat(self) -> None:
        get_coalescer().beat(self)
        if self.liveness is not None:
            self.liveness.beat()
        self.finish_recovery()
        if self.groups.due():
            await self.groups.add_all(self.rooms, self.watched)
        if any(dispatch.count_only(r) for r in self.rooms):
            await roomstate.get_counts().renew()
        if self.rooms:
            await get_feeds().renew()

    @in_tenant
    async def activity(self) -> None:
        # Throttled per connection; the first activity after idle always passes (idle means
        # no write for IDLE_AFTER, which is longer than the throttle).
        if self.liveness is not None:
            self.liveness.active()
        if self.activity_throttle.ready():
            await presence.aactivity(self.user_id)

    @in_tenant
    async def join(self, room: str) -> None:
        room = rules.room(room)
        if room in self.rooms:
            await self.send_room_state(room)
            return
        limit = int(conf.get("MAX_ROOMS_PER_CONNECTION"))
        if len(self.rooms) >= limit:
            raise FrameError("limit", f"A connection may join at most {limit} rooms.")
        if not await presence.acan_join(self.user, room):
            raise FrameError("forbidden", "You may not join this room.")
        # Into the room's feed before the snapshot is read: events are held until it is sent,
        # none is missed. (A count-only room has no feed: its counts come on the tick.)
        group, fed = dispatch.sockets_group(room), not dispatch.count_only(room)
        try:  # a join cut short (the connection ends meanwhile) leaves no group behind
            await self.groups.add([group])
            if fed:
                await get_feeds().enter(self, room)
            await self._store_join(room)
        except BaseException as exc:
            if isinstance(exc, UNAVAILABLE):
                self.unsure.add(room)
            get_feeds().exit(self, room)
            await self.groups.discard([group])
            raise
        self.rooms.add(room)
        await self.send_room_state(room)

    @in_tenant
    async def leave(self, room: str) -> None:
        room = rules.room(room)
        if room not in self.rooms:
            raise FrameError("not_joined", "This connection is not in that room.")
        # The feed is left before the leave event comes back through it: the connection hears
        # its own leave from the store's answer, once.
        self.rooms.discard(room)
        get_feeds().exit(self, room)
        try:
            left = await presence.aleave(room, self.conn_id, self.user_id)
        except UNAVAILABLE as exc:
            # The client has left: so does the connection, and the store's leave is retried
            # until Redis takes it, then told to the room (it may have been done unanswered).
            log_outage(exc, "a leave")
            leave_later(room, self)
            left = []
        except BaseException:
            self.rooms.add(room)
            if not dispatch.count_only(room):
                await get_feeds().enter(self, room, held=False)  # back in, as it was
            raise
        self.typing_throttle.forget(room)
        self.outbox.drop(room)
        self.diffs.drop(room)
        await self.uncount({room})
        await self.groups.discard([dispatch.sockets_group(room)])
        try:
            await self.clear_states({room})  # announced as a removal, for another tab's sake
        except UNAVAILABLE as exc:
            log_outage(exc)  # the entry dies with the lease; reads skip it meanwhile
        for event in [t.as_event() for t in left if t.kind == "leave" and t.room == room]:
            if self.batched:
                entry = roomstate.diff_entry(event)
                event = {"type": "presence.diff", "room": room, "joined": [], "left": [entry]}
            await self.send(event)

    @in_tenant
    async def revoke(self, room: str) -> None:
        """Access to ``room`` was taken away (:func:`presence.revoke`, an ended membership):
        out of it now, with a leave, and the browser told why."""
        async with self.lock:
            if room not in self.rooms or self.closed:
                return
            await self.leave(room)
        await self.refused(room)

    @in_tenant
    async def drop_stale(self, rooms: list[str]) -> None:
        """Leaves, in the store, the ``rooms`` a resumed lease still holds but this connection
        was not let back into (``CAN_JOIN`` now refuses them)."""
        try:
            for room in rooms:
                if room not in self.rooms:
                    await presence.aleave(room, self.conn_id, self.user_id)
        except UNAVAILABLE as exc:
            log_outage(exc)  # the lease's grace ends the membership instead

    @in_tenant
    async def set_status(self, **fields: Any) -> None:
        """The front door tells the user's own sockets (this one included) their true state;
        this connection applies it before its next frame: unknown from the change on (nothing
        goes out), then read back (a typing frame right after ``invisible`` sends nothing)."""
        if fields.get("state") is not None:
            self.own_state = None
        await presence.aset_status(self.user_id, **fields)
        if self.own_state is None:
            await self.read_own_state()

    @in_tenant
    async def set_privacy(self, last_seen: str | None, approximate: bool | None) -> None:
        """The user's choice of who sees their last seen; the whole choice is sent back."""
        choice = await presence.aset_privacy(self.user_id, last_seen, approximate)
        await self.send(protocol.privacy_frame(choice))

    @in_tenant
    async def typing(self, room: str) -> None:
        room = rules.room(room)
        if room not in self.rooms:
            raise FrameError("not_joined", "Join the room before typing in it.")
        if dispatch.count_only(room):
            raise FrameError("forbidden", COUNT_ONLY)
        # Ephemeral and best effort: throttled, never from an invisible user (a giveaway), nor
        # while this connection does not know its own state.
        if self.own_state is None:
            await self.read_own_state()
        if self.publishes and self.typing_throttle.ready(room):
            # the store has the last word: an invisible user, or a connection out of the room,
            # is refused there whatever this connection believes
            await presence.atyping(room, self.conn_id, self.user_id, sender=self.channel_name)

    @in_tenant
    async def set_room_state(self, room: str, data: Any) -> None:
        """This connection's live state in ``room`` (None clears it): coalesced, latest wins,
        sent to the room's members at most ``ROOM_STATE_RATE`` times a second."""
        room = rules.room(room)
        if room not in self.rooms:
            raise FrameError("not_joined", "Join the room before setting a state in it.")
        if dispatch.count_only(room):
            raise FrameError("forbidden", COUNT_ONLY)
        text = roomstate.encode(data)
        if self.own_state is None:
            await self.read_own_state()
        if not self.publishes:
            return  # an invisible user publishes nothing (a giveaway), nor an unknown one
        self.published.add(room)
        roomstate.get_coalescer().put(self, room, text)

    async def clear_states(self, rooms: set[str]) -> None:
        """Removes this connection's states in ``rooms`` (store and members told)."""
        mine = sorted(rooms & self.published)
        if not mine:
            return
        coalescer = roomstate.get_coalescer()
        for room in mine:
            coalescer.discard(self, room)
        self.published -= set(mine)
        entry = (self.user_id, self.public_id, self.conn_id, None)
        await presence.apublish_room_states({room: [entry] for room in mine})

    @in_tenant
    async def watch(self, target: set[str], shown: list[str]) -> None:
        """Makes ``target`` the watch list, then sends the presence of ``shown``."""
        limit = int(conf.get("MAX_WATCHED_USERS"))
        if len(target) > limit:
            raise FrameError("limit", f"A connection may watch at most {limit} users.")
        added, removed = target - self.watched, self.watched - target
        # Counted before subscribing: a failure midway leaves a superset, which the next watch
        # or the close cleans up.
        self.watched |= added
        await self.groups.add([dispatch.watchers_group(u) for u in added])
        await self.groups.discard([dispatch.watchers_group(u) for u in removed])
        self.watched = target
        if shown:
            presences = await presence.aget_many(shown, viewer=self.viewer, activity=True)
            for p in presences.values():
                self.hidden.learn(p.user_id, p.state)
            await self.send(protocol.state_frame(presences.values(), watch=True))

    @in_tenant
    async def send_room_state(self, room: str) -> None:
        """The room's members in frames of ``ROOM_SNAPSHOT_PAGE`` members and about
        ``ROOM_SNAPSHOT_BYTES`` (a member and their states never split): ``page`` 0 replaces what
        the browser held, the next ones add to it, ``more`` is false on the last. A page costs
        one round trip; members outside the viewer's audience are left out (the policy's
        answers come from this connection's memory of them, or one call for the list). A
        count-only room's is its count (``presence.count``), and its changes on the tick."""
        if dispatch.count_only(room):
            await roomstate.get_counts().add(self, room)
            return
        # what it holds of the room, this has; what comes meanwhile follows it. The joiners
        # of a tick in this process share one read of the room (feeds.Joiners).
        async with get_feeds().snapshot(self, room), self.diffs.snapshot(room):
            if not await get_feeds().send_snapshot(self, room):
                await self._send_members(room)

    async def _send_members(self, room: str) -> None:
        ids = await presence.aroom_members(room, viewer=self.viewer)
        states = await presence.aroom_states(room, viewer=self.viewer) if ids else []
        size = max(1, int(conf.get("ROOM_SNAPSHOT_PAGE")))
        pages = [ids[i : i + size] for i in range(0, len(ids), size)] or [[]]
        mine = (self.user_id, self.public_id)
        held: dict[str, Any] | None = None  # a frame is sent once the next one is known
        n = 0
        for page in pages:
            presences = (
                await presence.aget_many(page, viewer=self.viewer, activity=True) if page else {}
            )
            for p in presences.values():
                self.hidden.learn(p.user_id, p.state)
            shown = [p for p in presences.values() if p.is_online]
            # Only states of members this page shows online: none of anyone the viewer does not
            # see (an invisible user, one outside the audience), nor this connection's own.
            online = {p.user_id for p in shown}
            page_states = [
                st for st in states if st["user"] in online and (st["user"], st["conn"]) != mine
            ]
            for members, their_states in protocol.byte_pages(shown, page_states):
                if held is not None:
                    await self.send(held)
                held = protocol.state_frame(
                    members, room=room, page=n, more=True, states=their_states
                )
                n += 1
        if held is not None:  # always: byte_pages yields a page, empty or not
            held["more"] = False
            await self.send(held)

    # -- events from the channel layer ----------------------------------------------------------
    @in_tenant
    async def event(self, event: dict[str, Any]) -> None:
        """Relays a ``presence.*`` group event to the browser: once, only about users this
        viewer may see (``AUDIENCE``), nothing of a room this connection is not in (left,
        revoked: already queued events of it included), and no typing or room state of a user
        it knows to be offline or invisible."""
        if self.closed:
            return
        if event.get("type") == "presence.roomstate":
            await self.room_state_event(event)
            return
        if event.get("type") == "presence.typing":
            if event.get("sender") == self.channel_name:
                return  # not echoed to the typist
            if event.get("user") in self.hidden or event.get("state") not in PUBLISHING_STATES:
                return  # whatever its sender believed: offline or invisible here
            event = {k: v for k, v in event.items() if k != "sender"}
        elif event.get("self"):
            await self.own_state_is(event.get("state"))
            await self.send(event)
            return
        else:
            self.hidden.learn(event.get("user", ""), event.get("state"))
        if "room" in event and dispatch.count_only(str(event.get("room"))):
            return  # nothing of a count-only room's members but its count (dispatch sends none)
        if "room" in event and event.get("room") not in self.rooms:
            return  # left or revoked (its own leave came from leave()), or not in yet (the
            # snapshot is next)
        if self.batched and event.get("type") in roomstate.DIFF_EVENTS:
            if event.get("type") == "presence.update" and not self.recent.first_time(event):
                return
            if event.get("type") == "presence.join" and event.get("user") == self.user_id:
                return  # its own join (the only one of its user while it is in): the snapshot
                # it just got lists it
            await self.diffs.add(event)  # redacted when its tick's frame goes out
            return
        shown = await presence.aredact_event(event, viewer=self.viewer)
        if shown is None:
            return
        # deduplicated on the event as sent, not as redacted: two offlines whose time a privacy
        # choice withholds read alike, and the second one must still arrive
        if shown.get("type") == "presence.update" and not self.recent.first_time(event):
            return
        if shown.get("type") == "presence.typing":
            await self.diffs.ahead(str(shown.get("room")))  # after the diff showing the typist
        await self.send(shown)

    async def uncount(self, rooms: set[str]) -> None:
        """Out of the count-only ones among ``rooms``: their counts stop coming."""
        for room in [r for r in rooms if dispatch.count_only(r)]:
            await roomstate.get_counts().discard(self, room)

    def accept(self, kinds: list[str]) -> None:
        """The client handles these frame types (its ``hello`` frame): ``presence.diff``
        batches the joins, leaves and updates it gets."""
        self.batched = "presence.diff" in kinds
        get_feeds().accepted(self)

    async def _send_diff(self, frame: dict[str, Any]) -> None:
        """A diff of its watched users' updates: the joins and leaves its rooms' feeds hold
        go first (an update never overtakes a change that came before it)."""
        if "updated" in frame:
            await get_feeds().ahead()
        await self.send(frame)

    @in_tenant
    async def _redact_events(self, events: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
        """A tick's joins, leaves and updates through the one redaction, for this viewer."""
        return await presence.aredact_events(events, viewer=self.viewer)

    async def room_state_event(self, event: dict[str, Any]) -> None:
        """Members' room states: this connection's own left out, the others only of users this
        viewer may see (the one redaction), buffered to one frame per room per tick."""
        room = event.get("room")
        if room not in self.rooms or dispatch.count_only(room):
            return
        mine = self.public_id
        states = [
            st
            for st in event.get("states") or ()
            if isinstance(st, dict)
            and (st.get("conn") != mine or str(st.get("user")) != self.user_id)
            # A state (not its removal) of a user known offline: it followed their offline.
            and (st.get("data") is None or str(st.get("user")) not in self.hidden)
        ]
        if not states:
            return
        shown = await presence.aredact_states(states, viewer=self.viewer)
        if shown:
            await self.outbox.add(room, shown)

    # -- a lost lease taken back: Redis restarted, a long silence got it swept, its keys were
    # evicted (the coalescer's callbacks), or it cannot be written (Redis away) -----------------
    def lease_lost(self) -> None:
        if not self.closed:
            self.recovering = True
            spawn(self.tasks, self._recover())

    def finish_recovery(self) -> None:
        """A heartbeat came: a recovery Redis cut short is tried again. Once the lease is taken
        its heartbeats renew it and report nothing missing, so a room left unjoined (Redis
        refused the join a moment after it took the connect) would otherwise stay lost."""
        if self.recovery_due and not self.recovering:
            self.lease_lost()

    def owe(self, room: str) -> None:
        """A room the connection joins by itself (a permanent one) met an outage: the browser
        never asked for it, so it will not ask again. The recovery that the next heartbeat
        starts (:meth:`finish_recovery`) joins it once Redis answers."""
        self.owed.add(room)
        self.recovery_due = True

    def lease_unavailable(self) -> None:
        if not self.closed and self.outage_notice.ready():
            spawn(
                self.tasks,
                self.send(
                    protocol.error_frame(
                        "unavailable",
                        protocol.RETRYING,
                        frame="heartbeat",
                    )
                ),
            )

    async def unavailable(self, exc: BaseException, **extra: Any) -> None:
        log_outage(exc)
        await self.send(protocol.error_frame("unavailable", protocol.TRY_AGAIN, **extra))

    @in_tenant
    async def _recover(self) -> None:
        """The lease is gone (Redis restarted, or a long silence got it swept): take it again,
        re-join the rooms and resend their state."""
        try:
            async with self.lock:
                if not self.closed:
                    await self._try_recover()
        finally:
            self.recovering = False

    async def _try_recover(self) -> None:
        try:
            await self._reassert()
            # Due until the browser has each room's state too: once the lease and the rooms are
            # back the heartbeats report nothing missing, so a state read Redis refused here
            # would otherwise never be sent (the browser would keep the members of before).
            self.recovery_due = True
            for room in sorted(self.rooms):
                await self.send_room_state(room)
            await self._join_owed()
            self.recovery_due = False
        except UNAVAILABLE as exc:
            # Redis answered a moment ago (it reported the lease missing), so this is most
            # likely a pooled connection that died with a Redis restart: check again with the
            # next flush, once; a lasting failure is retried by the heartbeats (finish_recovery).
            log_outage(exc)
            if not self.recover_retried:
                self.recover_retried = True
                get_coalescer().beat(self)
            self.lease_unavailable()
            return
        except UnknownConnection:
            # The lease vanished again between connect and join (keys evicted under memory
            # pressure): the next flush finds it missing and this runs once more.
            get_coalescer().beat(self)
            return
        self.recover_retried = False

    async def _reassert(self) -> None:
        """Takes the lease, the status and the rooms again (each change announced)."""
        self.recovery_due = True  # until the last room is joined again
        await self.groups.add_all(self.rooms, self.watched)
        await get_feeds().readd(self)
        if self.own_state in ("invisible", "dnd"):
            # A Redis restart lost the status with the rest: set it again first, so that an
            # invisible user's connect and joins below announce nothing (a no-op otherwise).
            await presence.aset_status(self.user_id, self.own_state)
        await presence.aconnect(self.conn_id, self.user_id, device=self.device)
        if self.own_state is None:  # opened while Redis was away: learnt now
            await self.read_own_state()
        for room in sorted(self.rooms):
            # A connection taken again is let into its rooms again only as a new one would be.
            if not await presence.acan_join(self.user, room):
                await self.refused(room)
                continue
            await presence.ajoin(room, self.conn_id, self.user_id)
        self.recovery_due = False

    async def refused(self, room: str) -> None:
        """``CAN_JOIN`` no longer admits this connection to ``room``: out of it, browser told;
        nothing more of it reaches the browser (event() drops what is queued)."""
        self.rooms.discard(room)
        get_feeds().exit(self, room)
        self.typing_throttle.forget(room)
        self.outbox.drop(room)
        self.diffs.drop(room)
        await self.uncount({room})
        await self.groups.discard([dispatch.sockets_group(room)])
        await self.send(
            protocol.error_frame(
                "forbidden", "You may no longer be in this room.", frame="join", room=room
            )
        )

    async def _join_owed(self) -> None:
        """Joins the rooms an outage kept this connection out of (:meth:`owe`), each with its
        ``CAN_JOIN`` and its state; a refusal other than the outage goes to the browser."""
        for room in sorted(self.owed):  # the recovery stays due until the last is joined
            try:
                await self.join(room)
            except FrameError as exc:
                await self.send(protocol.error_frame(exc.code, exc.detail, frame="join", room=room))
            self.owed.discard(room)

    async def _store_join(self, room: str) -> None:
        try:
            made = await presence.ajoin(room, self.conn_id, self.user_id)
        except UnknownConnection:  # the lease was lost before its heartbeat told us
            try:
                await self._reassert()
                made = await presence.ajoin(room, self.conn_id, self.user_id)
            except UnknownConnection as exc:
                # Lost again at once (swept while the process stalled): the next heartbeat
                # takes it back (recovery_due), and the browser asks again.
                raise FrameError("unavailable", protocol.TRY_AGAIN) from exc
        if room in self.unsure:
            # An earlier join of it met an outage: if Redis did it, this one found the
            # connection there and told nobody, and the room never heard of the join.
            if not any(t.kind == "join" and t.room == room for t in made):
                await presence.aannounce_join(room, self.user_id)
            self.unsure.discard(room)
