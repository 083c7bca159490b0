"""The front door: ``from presence_app import presence``.

Every entry point goes through these functions: the WebSocket consumer and its mixin, the JSON
API, the middleware, the template tags, the admin dashboard, the sweeper, the ``presence``
command, and a project's own views, shells and tasks. Each call

1. validates its arguments once (:mod:`presence_app.core.rules`; a bad one raises
   :class:`~presence_app.store.InvalidInput`),
2. calls the store (one round trip, one Lua script per change), and
3. announces every transition it made, once: channel-layer events to the browsers that care and
   Django signals to Python code (:mod:`presence_app.core.dispatch`).

So ``presence.set_status(user, "dnd")`` from a view turns the user's dot red in every browser,
and ``presence.sweep()`` from a cron job fires ``user_offline`` (which writes ``LastSeen``).
Users may be given as user objects, primary keys or id strings. Each function has an ``a``-
prefixed twin for async code (``aget``, ``ajoin``, ...), the way Django names its own. Who may
enter a room is :func:`can_join` / :func:`acan_join` (the ``CAN_JOIN`` hook).

Every read states its viewer (:mod:`presence_app.access.visibility`): a user sees what the ``AUDIENCE``
policy lets them; a read without one reads as a signed-out visitor (``ANONYMOUS``); the site's own
code spells ``viewer=presence.TRUSTED`` to read the truth, invisible users included. Every
result passes the one redaction in :mod:`presence_app.access.visibility` on its way out.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field, replace
from functools import wraps
from typing import Any

from asgiref.sync import async_to_sync

from . import conf
from .access import audience, privacy, visibility
from .access.visibility import ANONYMOUS, redact, viewer_of
from .access.visibility import TRUSTED as TRUSTED
from .access.visibility import Viewer as Viewer
from .core import dispatch, hooks, rules
from .core.connection import get_async_store, get_store
from .store import InvalidInput, StateCounts, Transition
from .store import Presence as Presence

User = Any  # a user object, a primary key or an id string


def _status_args(
    state: str | None,
    message: str | None,
    emoji: str | None,
    expires_in: float | None,
    device: str | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"state": rules.status_state(state)}
    for name, value in (("message", message), ("emoji", emoji), ("device", device)):
        text = rules.status_text(name, value)
        if text is not None:
            out[name] = text
    out["expires_in"] = rules.expires_in(expires_in)
    return out


# -- how a call runs: each defined once, as a generator, driven sync or async ----------------------
# A call is a generator: it yields what it needs, a store plan (``lambda planned: Plan``, one
# round trip), the policy's answer for a list (an _Ask) or an announcement (an _Announce), and
# returns its result. The sync function runs it with _drive, the ``a`` twin with _adrive, and
# batch() runs the first plans of several reads in one round trip. Every read's result passes
# visibility's redaction on its way out; every write's transitions are announced once.
Read = Generator[Any, Any, Any]
Write = Generator[Any, Any, Any]


@dataclass(frozen=True)
class _Ask:
    """What ``viewer`` may learn of ``ids`` (a :class:`~presence_app.access.visibility.Sight`): the
    ``AUDIENCE`` policy's answer and, for ``last_seen``, the users' privacy choices."""

    viewer: Viewer
    ids: list[str]
    last_seen: bool = True


@dataclass(frozen=True)
class _Announce:
    """What a write tells, once: its ``transitions`` (to the groups that care, and as signals),
    the user's ``own`` true state (to their own devices), a room's ``states`` (``(room,
    entries)``, to its members)."""

    transitions: list[Transition] = field(default_factory=list)
    own: Presence | None = None
    states: tuple[str, list[dict[str, Any]]] | None = None


def _announce(told: _Announce) -> None:
    dispatch.publish(told.transitions, own=told.own)  # one round trip for both
    if told.states is not None:
        async_to_sync(dispatch.aroom_states)(*told.states)


async def _aannounce(told: _Announce) -> None:
    await dispatch.apublish(told.transitions)
    if told.own is not None:
        await dispatch.aannounce_self(told.own)
    if told.states is not None:
        await dispatch.aroom_states(*told.states)


def _drive(call: Read, store: Any, reply: Any = None) -> Any:
    while True:
        try:
            need = call.send(reply)
        except StopIteration as done:
            return done.value
        if isinstance(need, _Ask):
            reply = visibility.sight(need.viewer, need.ids, need.last_seen)
        elif isinstance(need, _Announce):
            reply = _announce(need)
        else:
            reply = store.run(need(store.planned))


async def _adrive(call: Read, store: Any) -> Any:
    reply = None
    while True:
        try:
            need = call.send(reply)
        except StopIteration as done:
            return done.value
        if isinstance(need, _Ask):
            reply = await visibility.asight(need.viewer, need.ids, need.last_seen)
        elif isinstance(need, _Announce):
            reply = await _aannounce(need)
        else:
            reply = await store.run(need(store.planned))


def _sync(definition: Callable[..., Read]) -> Callable[..., Any]:
    @wraps(definition)
    def call(*args: Any, **kwargs: Any) -> Any:
        store = get_store()
        return _drive(definition(*args, **kwargs), store)

    call.__name__ = call.__qualname__ = definition.__name__.lstrip("_")
    return call


def _async(definition: Callable[..., Read]) -> Callable[..., Any]:
    @wraps(definition)
    async def call(*args: Any, **kwargs: Any) -> Any:
        return await _adrive(definition(*args, **kwargs), get_async_store())

    call.__name__ = call.__qualname__ = "a" + definition.__name__.lstrip("_")
    call.__doc__ = f":func:`{definition.__name__.lstrip('_')}` for async code."
    return call


def _change(method: str, *args: Any, **kwargs: Any) -> Write:
    """The store call ``method``, then its transitions announced."""
    transitions = yield lambda s: getattr(s, method)(*args, **kwargs)
    yield _Announce(transitions)
    return transitions


# -- state changes: each returns (and has announced) the transitions it made -------------------
def _touch(user: User, activity: bool = True, now: float | None = None) -> Write:
    """A sign of life outside a socket (an HTTP request): online for ``ONLINE_WINDOW``;
    ``activity`` also resets idle."""
    return (yield from _change("touch", rules.user_id(user), bool(activity), now))


def _touch_many(items: Iterable[tuple[User, bool]], now: float | None = None) -> Write:
    """:func:`touch` for many ``(user, activity)`` pairs in one round trip (the middleware's
    background batch)."""
    pairs = [(rules.user_id(u), bool(a)) for u, a in items]
    return (yield from _change("touch_many", pairs, now)) if pairs else []


def _activity(user: User, now: float | None = None) -> Write:
    """The person did something on a live connection: resets idle, and only that."""
    return (yield from _change("activity", rules.user_id(user), now))


def _idle(user: User, now: float | None = None) -> Write:
    """A connection of ``user`` saw no activity for ``IDLE_AFTER`` (its session calls this);
    they go idle unless another device of theirs was active since."""
    return (yield from _change("idle", rules.user_id(user), now))


def _connect(
    conn_id: str,
    user: User,
    now: float | None = None,
    device: str | None = None,
    max_connections: int = 0,
) -> Write:
    """A connection (socket, stream) opened: it is held while its process lives. With
    ``max_connections``, raises :class:`~presence_app.store.TooManyConnections` (taking
    nothing) while the user holds that many open connections in this workspace already."""
    uid = rules.user_id(user)
    return (yield from _change("connect", conn_id, uid, now, device, max_connections))


def _heartbeat(conn_id: str, user: User, now: float | None = None) -> Write:
    """Renews one connection; False when the store holds none (connect it again). Sockets
    beat through the process' coalescer instead (:mod:`presence_app.realtime.coalescer`)."""
    return (yield lambda s: s.heartbeat(conn_id, rules.user_id(user), now))


def _heartbeat_many(pairs: Iterable[tuple[str, User]], now: float | None = None) -> Write:
    """Renews many ``(conn_id, user)`` connections at once; returns the pairs the store no
    longer holds (or whose user's listing was evicted): their sockets should connect again."""
    return (yield lambda s: s.heartbeat_many(pairs, now))


def _disconnect(conn_id: str, user: User, now: float | None = None) -> Write:
    """A clean close: the connection is held for ``DISCONNECT_GRACE`` more; the sweep announces
    the rest."""
    return (yield from _change("disconnect", conn_id, rules.user_id(user), now))


def _join(room: str, conn_id: str, user: User, now: float | None = None) -> Write:
    """The connection enters ``room``. Raises UnknownConnection when the store holds it not.
    Authorisation is the caller's: entry points ask :func:`can_join` first."""
    return (yield from _change("join", rules.room(room), conn_id, rules.user_id(user), now))


def _leave(room: str, conn_id: str, user: User, now: float | None = None) -> Write:
    """The connection leaves ``room`` (the user leaves it with their last connection there)."""
    return (yield from _change("leave", rules.room(room), conn_id, rules.user_id(user), now))


def _set_status(
    user: User,
    state: str | None = None,
    message: str | None = None,
    emoji: str | None = None,
    *,
    expires_in: float | None = None,
    device: str | None = None,
    now: float | None = None,
    **meta: Any,
) -> Write:
    """Sets the user's override (``online``/``auto``, ``dnd``, ``invisible``; None keeps it),
    status message and emoji ("" clears, None keeps), optionally expiring after ``expires_in``
    seconds. Everybody who may see the user hears of it; the user's own sockets learn their
    true state (``invisible`` included)."""
    uid = rules.user_id(user)
    args = _status_args(state, message, emoji, expires_in, device)
    # the write and the user's true state after it, from the one script call (two calls, even
    # in one round trip, may run in either order on a cluster client)
    transitions, own = yield lambda s: s.set_status_and_get(uid, now=now, **args, **meta)
    yield _Announce(transitions, own=own)
    return transitions


def _sweep(now: float | None = None) -> Write:
    """Evicts what ended (dead processes, ended graces, past windows) and announces the leaves
    and offlines; ``user_offline`` makes their last seen durable."""
    swept: list[Transition] = []
    more = True
    while more:  # in rounds of SWEEP_BATCH, each one round trip
        more, transitions = yield lambda s: s.sweep_round(now)
        swept += transitions
    yield _Announce(swept)
    return swept


touch, atouch = _sync(_touch), _async(_touch)
touch_many, atouch_many = _sync(_touch_many), _async(_touch_many)
activity, aactivity = _sync(_activity), _async(_activity)
idle, aidle = _sync(_idle), _async(_idle)
connect, aconnect = _sync(_connect), _async(_connect)
heartbeat, aheartbeat = _sync(_heartbeat), _async(_heartbeat)
heartbeat_many, aheartbeat_many = _sync(_heartbeat_many), _async(_heartbeat_many)
disconnect, adisconnect = _sync(_disconnect), _async(_disconnect)
join, ajoin = _sync(_join), _async(_join)
leave, aleave = _sync(_leave), _async(_leave)
set_status, aset_status = _sync(_set_status), _async(_set_status)
sweep, asweep = _sync(_sweep), _async(_sweep)


# -- messages to a user's every device --------------------------------------------------------
#: A message rides the channel layer (channels-redis refuses ~1 MB): keep it well below.
MAX_USER_MESSAGE_BYTES = 64 * 1024


def _payload(payload: Any) -> Any:
    try:
        size = len(json.dumps(payload, allow_nan=False).encode())
    except (TypeError, ValueError):
        raise InvalidInput(
            "The payload must be JSON: objects, lists, strings and numbers."
        ) from None
    if size > MAX_USER_MESSAGE_BYTES:
        raise InvalidInput(f"The payload may be at most {MAX_USER_MESSAGE_BYTES} bytes of JSON.")
    return payload


def send_to_user(user: User, payload: Any) -> None:
    """Delivers ``payload`` (JSON) to every open socket and SSE stream of ``user``, on every
    process (all their tabs and devices); the browsers get ``{"type": "presence.message",
    "payload": ...}`` (presence.js: the ``direct`` event). Nobody else receives it; a user with
    no open connection receives nothing (it is not stored)."""
    async_to_sync(asend_to_user)(user, payload)


async def asend_to_user(user: User, payload: Any) -> None:
    """:func:`send_to_user` for async code."""
    await dispatch.asend_to_user(rules.user_id(user), _payload(payload))


# -- live per-member room state (a connection's own is coalesced by presence_app.realtime.roomstate) -----
#: The public id of the state a server sets for a user (:func:`set_room_state`).
SERVER_STATE = "server"


def _state_entries(entries: list[tuple[str, str, str, str | None]]) -> list[dict[str, Any]]:
    return [
        {"user": uid, "conn": pub, "data": None if text is None else json.loads(text)}
        for uid, pub, _, text in entries
    ]


def _set_room_state(user: User, room: str, data: dict[str, Any] | None) -> Write:
    """Sets ``user``'s server-driven state in ``room`` (``conn`` ``"server"`` in frames; None
    removes it) and tells the room's members, as a connection's state is. A JSON object of at
    most ``ROOM_STATE_MAX_BYTES`` (else :class:`InvalidInput`). Returns False, sending nothing,
    when the user is not a visible member of the room (an invisible user publishes nothing); the
    state ends when the user leaves the room."""
    uid, name, text = rules.user_id(user), rules.room(room), rules.room_state(data)
    if dispatch.count_only(name):
        return False  # nobody in a count-only room learns who is there
    taken = yield lambda s: s.set_room_states(name, [(uid, SERVER_STATE, "", text)])
    if taken:
        yield _Announce(states=(name, _state_entries(taken)))
    return bool(taken)


set_room_state, aset_room_state = _sync(_set_room_state), _async(_set_room_state)


async def apublish_room_states(rooms: dict[str, list[tuple[str, str, str, str | None]]]) -> None:
    """One tick of a process's coalesced room states: ``{room: [(user_id, public id, conn_id,
    JSON or None)]}`` written in one round trip (the latest values, for snapshots), and what the
    store took sent as one event per room. The store refuses a connection out of the room or
    without a lease, and a user the room does not list (an invisible one): what it refuses
    reaches nobody. A joiner listens before it reads its snapshot, so it misses neither."""
    store = get_async_store()
    named = {rules.room(room): entries for room, entries in rooms.items() if entries}
    named = {room: entries for room, entries in named.items() if not dispatch.count_only(room)}
    taken = await store.gather(*(store.planned.set_room_states(r, e) for r, e in named.items()))
    await asyncio.gather(
        *(dispatch.aroom_states(r, _state_entries(t)) for r, t in zip(named, taken, strict=True))
    )


def typing(room: str, conn_id: str, user: User, *, sender: str = "") -> bool:
    """Tells ``room`` that ``user`` is typing on ``conn_id`` (``sender``: a channel not to tell,
    the typist's own). The store decides: False, and nothing sent, when the connection is not in
    the room or the user is invisible (a typing would give them away)."""
    return async_to_sync(atyping)(room, conn_id, user, sender=sender)


async def atyping(room: str, conn_id: str, user: User, *, sender: str = "") -> bool:
    """:func:`typing` for async code."""
    uid, name = rules.user_id(user), rules.room(room)
    if dispatch.count_only(name):
        return False  # nobody in a count-only room learns who is there
    state = await get_async_store().typing(name, conn_id, uid)
    if state is None:
        return False
    await dispatch.atyping(name, uid, state, sender)
    return True


# -- who may be in a room ----------------------------------------------------------------------
def revoke(user: User, room: str) -> None:
    """Takes ``user``'s live connections (sockets and streams, on every process) out of
    ``room`` now, each with a leave to the room: access to it was taken away. A later join, a
    reconnect and a resumed stream ask ``CAN_JOIN`` again."""
    async_to_sync(arevoke)(user, room)


async def arevoke(user: User, room: str) -> None:
    """:func:`revoke` for async code."""
    await dispatch.arevoke(rules.user_id(user), rules.room(room))


async def aannounce_join(room: str, user: User) -> bool:
    """Tells ``room`` (and ``user_joined``) of ``user``'s join again, as the store's join tells
    it: a join Redis did while its caller's call timed out (a stalled Redis) was never
    announced, and the join asked again finds the connection there and announces nothing. Their
    state as the public sees it; nothing for a user the public does not see (invisible, gone).
    A client that lists the user already finds no change in it. True if it was told."""
    return await _announce_again("join", room, user)


async def aannounce_leave(room: str, user: User) -> bool:
    """Tells ``room`` (and ``user_left``) of ``user``'s leave, as the store's leave tells it: a
    leave Redis did while its caller's call failed was never announced, and the leave asked
    again finds nothing to do. Only if the user is in the room no more (another connection of
    theirs may be) and the public sees them (an invisible user's comings and goings are told
    to nobody). True if it was told."""
    return await _announce_again("leave", room, user)


#: The states the public sees as present (an invisible user reads as offline).
_SHOWN = ("online", "idle", "dnd")


async def _announce_again(kind: str, room: str, user: User) -> bool:
    uid, name = rules.user_id(user), rules.room(room)
    if kind == "leave" and name in (await auser_rooms_many([uid], viewer=TRUSTED))[uid]:
        return False  # another connection of theirs keeps them in it
    me = await aget(uid, viewer=TRUSTED)
    shown = me.state in _SHOWN
    if me.state == "invisible" or (kind == "join" and not shown):
        return False
    told = Transition(kind, uid, me.state if shown else "offline", time.time(), name)
    await dispatch.apublish([replace(told, message=me.message, emoji=me.emoji) if shown else told])
    return True


def end_session(user: User, session_key: str) -> None:
    """Ends ``user``'s live connections (sockets and streams, on every process) that were
    opened with the sign-in ``session_key``: it signed out. Each closes (a socket with 4402),
    and its browser connects again with its cookies as they are now. Called at each sign-out
    (``user_logged_out``)."""
    async_to_sync(aend_session)(user, session_key)


async def aend_session(user: User, session_key: str) -> None:
    """:func:`end_session` for async code."""
    await dispatch.aend_session(rules.user_id(user), session_key)


# -- privacy ----------------------------------------------------------------------------------
def set_privacy(
    user: User, last_seen: str | None = None, approximate: bool | None = None
) -> privacy.Choice:
    """Who may see ``user``'s last seen: ``"everyone"`` who may see them, their
    ``"audience"`` (signed-in viewers the ``AUDIENCE`` policy admits) or ``"nobody"``; and
    ``approximate`` ("recently", "within a week", ...) or exact. None keeps a part. Applies
    with ``LAST_SEEN_PRIVACY`` on; returns the whole choice."""
    return privacy.save(user, last_seen, approximate)


async def aset_privacy(
    user: User, last_seen: str | None = None, approximate: bool | None = None
) -> privacy.Choice:
    """:func:`set_privacy` for async code."""
    return await privacy.asave(user, last_seen, approximate)


def get_privacy(user: User) -> privacy.Choice:
    """``user``'s own choice (the default when they made none)."""
    uid = rules.user_id(user)
    return privacy.choices([uid]).get(uid, privacy.DEFAULT)


# -- erasure ----------------------------------------------------------------------------------
def forget(user: User) -> list[Transition]:
    """Erases ``user`` (the right to be forgotten) in every workspace that may hold them
    (``tenants.everywhere``), each inside it: their live connections end, everything Redis
    keeps of them is deleted (leaves and offline announced, as a sweep would), then their
    ``LastSeen`` row, room memberships and privacy choice (the ``user_forgotten`` signal, sent
    in that workspace). Run by itself when a user is deleted."""
    return async_to_sync(aforget)(user)


async def aforget(user: User) -> list[Transition]:
    """:func:`forget` for async code."""
    from .core import tenants
    from .models import aworkspaces_with_rows

    uid = rules.user_id(user)
    with tenants.activate(None):  # the registry of the workspaces in use: the base prefix's
        live = await tenants.aactive(get_async_store())
    transitions: list[Transition] = []
    for key in tenants.everywhere(await aworkspaces_with_rows(uid), live):
        with tenants.activate(key):  # its key space, its groups, its rows
            await dispatch.aend_connections(uid)  # first: no connection takes a lease back
            transitions += await _adrive(_change("forget", uid), get_async_store())
            await dispatch.aannounce_forgotten(uid)  # the rows go after the offline wrote its own
    return transitions


def export(user: User) -> dict[str, Any]:
    """Everything presence keeps about ``user``, as JSON-ready data: ``{"user": id,
    "workspaces": {key ("" for the default space): {...}}}``, for each workspace that holds
    something of theirs: Redis' record, index scores and connections, and the rows (last seen,
    permanent rooms, privacy choice)."""
    from .core import tenants
    from .models import rows_of, workspaces_with_rows

    uid = rules.user_id(user)
    with tenants.activate(None):
        live = tenants.active(get_store())
    found: dict[str, Any] = {}
    for key in tenants.everywhere(workspaces_with_rows(uid), live):
        with tenants.activate(key):
            held = {**get_store().export(uid), **rows_of(uid)}
        held.pop("user", None)
        if any(held.values()):
            found[key or ""] = held
    return {"user": uid, "workspaces": found}


# -- who may enter a room ---------------------------------------------------------------------
def can_join(user: Any, room: str) -> bool:
    """May ``user`` (a user object) enter, and so see, ``room``? The ``CAN_JOIN`` hook decides
    (sync or async); True without one. Entry points ask before :func:`join` or a room read."""
    return hooks.can_join(user, rules.room(room))


async def acan_join(user: Any, room: str) -> bool:
    """:func:`can_join` for async code."""
    return await hooks.acan_join(user, rules.room(room))


# -- who reads: the viewer of a page, a request or a connection ---------------------------------
#: The AUDIENCE answers a page's or a request's viewer remembers (a connection: a few hundred).
PAGE_ANSWERS = 20_000


def viewer(user: Any, *, remember: int = PAGE_ANSWERS) -> Viewer:
    """The viewer a page, a request or a connection reads as: ``user`` (``ANONYMOUS``, None or
    a signed-out user read as the public; ``TRUSTED`` as the site's own code), remembering up
    to ``remember`` ``AUDIENCE`` answers for its reads (each read asks only about the users it
    has not asked about yet)."""
    return viewer_of(user, audience.Decisions(max_entries=remember))


def with_last_seen(
    presences: dict[str, Presence], durable: dict[str, Any], *, viewer: Any = ANONYMOUS
) -> dict[str, Presence]:
    """``presences`` (as ``viewer`` read them) with the database's last seen (``durable``:
    ``{user_id: datetime or None}``, the current workspace's ``LastSeen`` rows) where Redis
    knows none, redacted as every read is: never the row of a user the viewer may not see
    (the flush writes it while the user is online, so "last seen 2 minutes ago" would say
    "online"), and only as exactly as the user's privacy choice allows. One ``AUDIENCE`` call
    and one privacy query for the whole list."""
    v = viewer_of(viewer)
    wanted = [u for u, at in durable.items() if at is not None and u in presences]
    if not wanted:
        return presences
    seen = visibility.sight(v, wanted)
    out = dict(presences)
    for uid in wanted:
        out[uid] = visibility.with_durable(v, presences[uid], seen, durable[uid])
    return out


async def aredact_event(event: dict[str, Any], *, viewer: Any) -> dict[str, Any] | None:
    """An event about a user (``presence.update``, a join, a leave, a typing) as ``viewer``
    may receive it, or None: the one redaction, as every read's. The user's privacy matters
    only when the event tells when they were last seen."""
    v = viewer_of(viewer)
    last_seen = event.get("state") == "offline"
    seen = await visibility.asight(v, [str(event.get("user", ""))], last_seen=last_seen)
    return visibility.redact_event(v, event, seen)


async def aredact_events(
    events: list[dict[str, Any]], *, viewer: Any
) -> list[dict[str, Any] | None]:
    """Events about users (a connection's joins, leaves and updates of one tick) as ``viewer``
    may receive them, each as :func:`aredact_event` has it (None: not for this viewer), with
    one ``AUDIENCE`` call (and one privacy query, when an offline is among them) for all."""
    v = viewer_of(viewer)
    last_seen = any(e.get("state") == "offline" for e in events)
    if not visibility.needs_sight(v, last_seen):  # no policy, no privacy: nothing to ask
        return [visibility.redact_event(v, e, visibility.CLEAR) for e in events]
    ids = list(dict.fromkeys(str(e.get("user", "")) for e in events))
    seen = await visibility.asight(v, ids, last_seen=last_seen)
    return [visibility.redact_event(v, e, seen) for e in events]


async def aredact_states(states: list[dict[str, Any]], *, viewer: Any) -> list[dict[str, Any]]:
    """Members' room states as ``viewer`` may receive them: only those of users the viewer
    may see (only a policy decides: a state tells no last seen)."""
    v = viewer_of(viewer)
    asks = visibility.needs_sight(v, last_seen=False)
    ids = list(dict.fromkeys(str(st.get("user", "")) for st in states)) if asks else []
    seen = await visibility.asight(v, ids, last_seen=False)
    return visibility.redact_states(v, states, seen)


async def aredact_event_classes(
    events: list[dict[str, Any]], viewers: list[Any]
) -> list[tuple[list[dict[str, Any] | None], list[int]]]:
    """``events`` (a room's, as one process receives them) as each of ``viewers`` (its
    connections in the room) may receive them, by :func:`aredact_events`' rule, grouped by what
    they receive: ``[(events as redacted, the indices of the viewers who receive that)]``. With
    nothing to ask (no ``AUDIENCE`` policy, no privacy choice to read) everybody is one class,
    redacted once; else each viewer's sight is read (its remembered ``AUDIENCE`` answers), and
    viewers it shows the same share one list, so a room's frame is encoded once a class."""
    vs = [viewer_of(v) for v in viewers]
    last_seen = any(e.get("state") == "offline" for e in events)
    if not vs:
        return []
    if not visibility.needs_sight(visibility.PUBLIC, last_seen):  # nor any other viewer's
        return [([visibility.redact_event(vs[0], e, visibility.CLEAR) for e in events],
                 list(range(len(vs))))]  # fmt: skip
    ids = list(dict.fromkeys(str(e.get("user", "")) for e in events))
    classes: dict[tuple[Any, ...], tuple[list[dict[str, Any] | None], list[int]]] = {}
    for n, v in enumerate(vs):
        seen = await visibility.asight(v, ids, last_seen=last_seen)
        shown = [visibility.redact_event(v, e, seen) for e in events]
        # what this viewer gets: nothing, the event as sent, or a changed one (an offline)
        key = tuple(
            None if r is None else 0 if r is e else json.dumps(r, sort_keys=True, default=str)
            for e, r in zip(events, shown, strict=True)
        )
        classes.setdefault(key, (shown, []))[1].append(n)
    return list(classes.values())


async def aredact_state_classes(
    states: list[dict[str, Any]], viewers: list[Any]
) -> list[tuple[list[dict[str, Any]], list[int]]]:
    """Members' room states as each of ``viewers`` may receive them (:func:`aredact_states`'
    rule), grouped as :func:`aredact_event_classes` groups events."""
    vs = [viewer_of(v) for v in viewers]
    if not vs:
        return []
    if not visibility.needs_sight(visibility.PUBLIC, last_seen=False):
        return [(states, list(range(len(vs))))]
    ids = list(dict.fromkeys(str(st.get("user", "")) for st in states))
    classes: dict[tuple[int, ...], tuple[list[dict[str, Any]], list[int]]] = {}
    for n, v in enumerate(vs):
        shown = visibility.redact_states(v, states, await visibility.asight(v, ids, False))
        classes.setdefault(tuple(map(id, shown)), (shown, []))[1].append(n)
    return list(classes.values())


# -- reads: each defined once -----------------------------------------------------------------
def _sight(viewer: Viewer, ids: list[str], last_seen: bool = True) -> Read:
    """What ``viewer`` may learn of ``ids`` (no call, no query, no step when nothing decides)."""
    if ids and visibility.needs_sight(viewer, last_seen):
        return (yield _Ask(viewer, ids, last_seen))
    return visibility.CLEAR


def _listed(viewer: Viewer, ids: list[str]) -> Read:
    """A list of users (online, in a room) as ``viewer`` may see it: the policy decides."""
    return visibility.redact_ids(viewer, ids, (yield from _sight(viewer, ids, last_seen=False)))


def _get(user: User, *, viewer: Any = ANONYMOUS, now: float | None = None) -> Read:
    """One user's :class:`~presence_app.store.Presence` as ``viewer`` may see it (an invisible
    user reads as offline to everybody but themself and ``TRUSTED`` reads; outside the user's
    ``AUDIENCE`` the viewer reads them the same way)."""
    uid, v = rules.user_id(user), viewer_of(viewer)
    found = yield lambda s: s.get_many([uid], **v.store_args, now=now, activity=True)
    return redact(v, found[uid], (yield from _sight(v, [uid])), now)


def _get_many(
    users: Iterable[User],
    *,
    viewer: Any = ANONYMOUS,
    now: float | None = None,
    activity: bool = False,
) -> Read:
    """``{user_id: Presence}`` for any number of users, in one round trip, in the order given
    (and one ``AUDIENCE`` call). ``activity=True`` reads every connected user's
    ``last_active`` too, at the cost of a further read a user (a page of dots does without)."""
    ids, v = rules.user_ids(users), viewer_of(viewer)
    found = yield lambda s: s.get_many(ids, **v.store_args, now=now, activity=bool(activity))
    asked = ids
    if not v.filtered:
        # Without a policy only privacy choices decide, and only an offline user's last seen
        # (visibility.redact): a page of online users (a room's snapshot) asks nothing. A storm's
        # snapshots all queued for the one thread that query runs in (benchmark 17).
        asked = visibility.offline_ids(found)
    return visibility.redact_all(v, found, (yield from _sight(v, asked)), now)


def _scan_limit() -> int:
    """The most online entries one policy scan reads (``AUDIENCE_SCAN_LIMIT``)."""
    return max(audience.SCAN_CHUNK, int(conf.get("AUDIENCE_SCAN_LIMIT")))


#: A place in the online list: a listed entry's ``(score, id)`` (the store's order: score, then
#: id, both descending). A cursor of :func:`online_page`; ``None`` is the top of the list.
Position = tuple[float, str]


def _online_page(
    limit: int = 50,
    cursor: Position | None = None,
    window: float | None = None,
    now: float | None = None,
    *,
    viewer: Any = ANONYMOUS,
    include_invisible: bool = False,
    offset: int = 0,
) -> Read:
    """A page of online users, most recently seen first, and the position to go on from (None
    after the last): ``(ids, next_cursor)``. A cursor is a position in the list (the last
    entry's score and id), not an offset: the page after it costs its own size however deep it
    is, and users coming online above it do not move it. Under an ``AUDIENCE`` policy the list
    is read on from the cursor in chunks of ``audience.SCAN_CHUNK`` (one policy call a chunk,
    each chunk going on where the last ended), at most ``AUDIENCE_SCAN_LIMIT`` entries a page:
    a page of users the viewer may not see ends early, with a cursor to go on from.
    ``include_invisible`` lists invisible users too, for ``TRUSTED`` reads only. ``offset``
    skips that many of the users listed first (page numbers: it costs what it skips)."""
    v, limit, offset = viewer_of(viewer), max(0, int(limit)), max(0, int(offset))
    if not v.filtered:
        hidden_too = include_invisible and v.trusted
        entries = yield lambda s: s.online(
            window, offset, limit + 1, now, include_invisible=hidden_too, after=cursor, scores=True
        )
        if len(entries) <= limit:
            return [uid for uid, _ in entries], None
        page = entries[:limit]
        return [uid for uid, _ in page], (_position(page[-1]) if page else cursor)
    if offset:
        ids, at = yield from _online_page(offset + limit, cursor, window, now, viewer=v)
        return ids[offset:], at
    out: list[str] = []
    at, budget = cursor, _scan_limit()
    while budget > 0:
        size = min(audience.SCAN_CHUNK, budget)
        chunk = yield lambda s, at=at, size=size: s.online(
            window, 0, size, now, after=at, scores=True
        )
        shown = set((yield from _listed(v, [uid for uid, _ in chunk])))
        for uid, score in chunk:
            if len(out) == limit:  # full, and more to read: on from the last one taken
                return out, at
            if uid in shown:
                out.append(uid)
            at = (score, uid)
            budget -= 1
        if len(chunk) < size:
            return out, None
        if len(out) == limit:
            return out, at
    return out, at


def _position(entry: tuple[str, float]) -> Position:
    uid, score = entry
    return (score, uid)


def _shared_key(viewer: Viewer, now: float | None, *read: Any) -> tuple[Any, ...] | None:
    """The key of a signed-out visitor's read under a policy in ``audience.shared`` (every such
    visitor gets the same answer), or None for any other read (and one given its own clock)."""
    if viewer.id is not None or viewer.trusted or now is not None:
        return None
    from .core import tenants

    return (tenants.current(), *read)


def _online(
    window: float | None = None,
    offset: int = 0,
    limit: int | None = None,
    now: float | None = None,
    *,
    viewer: Any = ANONYMOUS,
    include_invisible: bool = False,
) -> Read:
    """Ids of online users, most recently seen first, paged by ``offset`` / ``limit``. Under
    an ``AUDIENCE`` policy, those ``viewer`` may see among the ``AUDIENCE_SCAN_LIMIT`` most
    recently seen (deep pages: :func:`online_page`'s cursor; a signed-out visitor's list is
    shared for ``audience.SHARED_SECONDS``). ``include_invisible`` lists invisible users too,
    for ``TRUSTED`` reads only."""
    v = viewer_of(viewer)
    if not v.filtered:
        hidden_too = include_invisible and v.trusted
        return (yield lambda s: s.online(window, offset, limit, now, include_invisible=hidden_too))
    key = _shared_key(v, now, "online", window, offset, limit)
    if key is not None and (known := audience.shared.get(key)) is not None:
        return list(known)
    wanted = _scan_limit() if limit is None else max(0, int(offset)) + max(0, int(limit))
    ids, _ = yield from _online_page(wanted, None, window, now, viewer=v)
    ids = ids[max(0, int(offset)) :]
    if key is not None:
        audience.shared.put(key, tuple(ids))
    return ids


def _online_count(
    window: float | None = None, now: float | None = None, *, viewer: Any = ANONYMOUS
) -> Read:
    """How many users are online, counted in Redis (invisible ones are not: see
    :func:`state_counts`). Under an ``AUDIENCE`` policy, how many of the
    ``AUDIENCE_SCAN_LIMIT`` most recently seen ``viewer`` may see (at most that many entries
    read and policy ids: the cost is bounded, the count is a lower bound past it); a signed-out
    visitor's count is shared for ``audience.SHARED_SECONDS`` (every visitor of a workspace
    reads the same, so one scan serves them all)."""
    v = viewer_of(viewer)
    if not v.filtered:
        return (yield lambda s: s.online_count(window, now))
    key = _shared_key(v, now, "online_count", window)
    if key is not None and (known := audience.shared.get(key)) is not None:
        return known
    ids, _ = yield from _online_page(_scan_limit(), None, window, now, viewer=v)
    if key is not None:
        audience.shared.put(key, len(ids))
    return len(ids)


def _listless(name: str, v: Viewer) -> bool:
    """Is ``name`` a count-only room (``COUNT_ONLY_ROOMS``) whose list ``v`` may not read?
    Only ``TRUSTED`` reads list its members: everyone else gets its count as a signed-out
    visitor counts it, and with ``COUNT_SAMPLE`` a few faces (:func:`room_sample`)."""
    return not v.trusted and dispatch.count_only(name)


def _room_members(
    room: str,
    now: float | None = None,
    *,
    viewer: Any = ANONYMOUS,
    among: Iterable[User] | None = None,
) -> Read:
    """Ids of the visible users in ``room``, in the order they came (as ``viewer`` sees them);
    none of a count-only room's but to ``TRUSTED`` reads (its count: :func:`room_count`).
    ``among``: only those of these users (a lookup each, however big the room). Whether the
    viewer may see the room at all is ``CAN_JOIN``'s: entry points ask first."""
    name, v = rules.room(room), viewer_of(viewer)
    if _listless(name, v):
        return []
    asked = None if among is None else rules.user_ids(among)
    ids = yield lambda s: s.room_members(name, now, asked)
    return (yield from _listed(v, ids))


def _room_states(room: str, now: float | None = None, *, viewer: Any = ANONYMOUS) -> Read:
    """The live per-member states in ``room`` as ``viewer`` may see them: ``[{"user", "conn",
    "data"}]`` of visible members with a live connection (or server state), in the audience
    (none in a count-only room, where nobody but ``TRUSTED`` reads learns who is there)."""
    name, v = rules.room(room), viewer_of(viewer)
    if _listless(name, v):
        return []
    found = yield lambda s: s.room_states(name, now)
    shown = set((yield from _listed(v, list(dict.fromkeys(uid for uid, _, _ in found)))))
    return [
        {"user": uid, "conn": pub, "data": json.loads(text)}
        for uid, pub, text in found
        if uid in shown
    ]


@dataclass(frozen=True)
class RoomRead:
    """A room read once for the connections of one process that join it within one
    membership tick (:mod:`presence_app.realtime.feeds`): its member ids in the order they
    came, their presences as a viewer who is none of them reads them (an invisible user reads
    offline), and its room states, *not yet redacted*: nothing of it goes out but through
    :func:`aroom_view`, which says what of it a given viewer may see."""

    ids: list[str]
    presences: dict[str, Presence]
    states: list[dict[str, Any]]
    conns: frozenset[tuple[str, str]]  # the (user, public connection id) of every state


def _room_read(room: str, now: float | None = None) -> Read:
    """:class:`RoomRead` of ``room``: the round trips of one viewer's snapshot (the members,
    the states, a ``get_many`` a ``ROOM_SNAPSHOT_PAGE``), for every viewer at once."""
    name = rules.room(room)
    ids = yield lambda s: s.room_members(name, now)
    found = (yield lambda s: s.room_states(name, now)) if ids else []
    size = max(1, int(conf.get("ROOM_SNAPSHOT_PAGE")))
    presences: dict[str, Presence] = {}
    for start in range(0, len(ids), size):
        page = ids[start : start + size]
        presences.update(
            (yield lambda s, page=page: s.get_many(
                page, viewer=None, reveal_all=False, now=now, activity=True
            ))
        )  # fmt: skip
    states = [{"user": uid, "conn": pub, "data": json.loads(text)} for uid, pub, text in found]
    return RoomRead(list(ids), presences, states, frozenset((u, c) for u, c, _ in found))


async def aroom_view(read: RoomRead, viewer: Any) -> frozenset[str] | None:
    """The ids of ``read`` that ``viewer`` may see, by the one rule (:func:`room_members`'
    list: the ``AUDIENCE`` policy's answer, the viewer themself always); None: all of them
    (nothing decides). Only online members of it are ever shown (an offline one's last seen,
    which privacy choices govern, never is): viewers with the same answer see the same."""
    v = viewer_of(viewer)
    if not read.ids or not visibility.needs_sight(v, last_seen=False):
        return None
    seen = await visibility.asight(v, read.ids, last_seen=False)
    return frozenset(visibility.redact_ids(v, read.ids, seen))


def _room_count(room: str, now: float | None = None, *, viewer: Any = ANONYMOUS) -> Read:
    """How many visible users are in ``room`` (as ``viewer`` sees them); a count-only room's
    as a signed-out visitor counts them, the same for everyone (invisible users never)."""
    name, v = rules.room(room), viewer_of(viewer)
    ids = yield lambda s: s.room_members(name, now)
    return len((yield from _listed(visibility.PUBLIC if _listless(name, v) else v, ids)))


def _room_sample(
    room: str, limit: int = 0, now: float | None = None, *, viewer: Any = ANONYMOUS
) -> Read:
    """A count-only room as its members learn it (``presence.count``): ``(count, sample)``,
    the count of its visible users as a signed-out visitor counts them (the same for everyone,
    whatever ``viewer``'s ``AUDIENCE``: it names nobody; invisible users never count), and the
    presences of at most ``limit`` of those, the first who came, that ``viewer`` sees online (as
    ``viewer`` reads them: nobody outside their audience, nobody invisible)."""
    name, v = rules.room(room), viewer_of(viewer)
    ids = yield lambda s: s.room_members(name, now)
    counted = yield from _listed(visibility.PUBLIC, ids)
    first = counted[: max(0, int(limit))]
    if not first:
        return len(counted), []
    found = yield lambda s: s.get_many(first, **v.store_args, now=now)
    shown = visibility.redact_all(v, found, (yield from _sight(v, first)), now)
    return len(counted), [p for p in shown.values() if p.is_online]


def _rooms(limit: int = 100, *, viewer: Any = ANONYMOUS) -> Read:
    """The busiest occupied rooms, ``[(room, members)]``. Under an ``AUDIENCE`` policy, the
    rooms with members the viewer may see, counting only them (one round trip for the members,
    one policy call a room). Whether a viewer may see a room is ``CAN_JOIN``'s to say."""
    v = viewer_of(viewer)
    found = yield lambda s: s.rooms(limit)
    if not v.filtered or not found:
        return found
    members = yield lambda s: s.gather(*(s.room_members(room) for room, _ in found))
    counted = []
    for (room, _), ids in zip(found, members, strict=True):
        # a count-only room counts the same for everyone (room_count)
        if shown := (yield from _listed(visibility.PUBLIC if _listless(room, v) else v, ids)):
            counted.append((room, len(shown)))
    return sorted(counted, key=lambda item: -item[1])


def _state_counts(
    limit: int = 10_000, now: float | None = None, *, viewer: Any = ANONYMOUS
) -> Read:
    """Online users by state (for dashboards), the states read for the ``limit`` most recently
    seen. Under an ``AUDIENCE`` policy, of the users the viewer may see among the
    ``AUDIENCE_SCAN_LIMIT`` most recently seen. Invisible users are counted for ``TRUSTED``
    reads only."""
    v = viewer_of(viewer)
    if not v.filtered:
        counts = yield lambda s: s.state_counts(limit, now)
        return counts if v.trusted else replace(counts, invisible=0)
    ids, _ = yield from _online_page(_scan_limit(), None, None, now, viewer=v)
    # The ids are those the policy admitted (invisible users are not among them): their states
    # read as the public sees them, without asking the policy again.
    found = yield lambda s: s.get_many(ids[:limit], now=now)
    states = Counter(p.state for p in found.values())
    return StateCounts(
        online=states["online"],
        idle=states["idle"],
        dnd=states["dnd"],
        total=len(ids),
        counted=min(len(ids), limit),
    )


def _user_rooms_many(users: Iterable[User], *, viewer: Any = ANONYMOUS) -> Read:
    """``{user_id: rooms}`` in one round trip: a user's rooms show only where the user is
    online to ``viewer`` (an invisible user's, or a hidden one's, read as none), and their
    count-only rooms to nobody but themself (and ``TRUSTED`` reads)."""
    ids, v = rules.user_ids(users), viewer_of(viewer)
    if v.trusted:
        return (yield lambda s: s.user_rooms_many(ids))
    rooms, found = yield lambda s: s.gather(s.user_rooms_many(ids), s.get_many(ids, **v.store_args))
    seen = yield from _sight(v, ids, last_seen=False)
    return {
        uid: [r for r in rooms[uid] if uid == v.id or not dispatch.count_only(r)]
        if redact(v, found[uid], seen).is_online
        else []
        for uid in ids
    }


def _history(since: float) -> Read:
    """The per-minute online samples since ``since``: ``[(minute, count)]``, oldest first (the
    site's public count: the same for every viewer)."""
    return (yield lambda s: s.history(since))


get, aget = _sync(_get), _async(_get)
get_many, aget_many = _sync(_get_many), _async(_get_many)
online, aonline = _sync(_online), _async(_online)
online_page, aonline_page = _sync(_online_page), _async(_online_page)
online_count, aonline_count = _sync(_online_count), _async(_online_count)
room_members, aroom_members = _sync(_room_members), _async(_room_members)
room_count, aroom_count = _sync(_room_count), _async(_room_count)
room_sample, aroom_sample = _sync(_room_sample), _async(_room_sample)
room_states, aroom_states = _sync(_room_states), _async(_room_states)
aroom_read = _async(_room_read)
rooms, arooms = _sync(_rooms), _async(_rooms)
state_counts, astate_counts = _sync(_state_counts), _async(_state_counts)
user_rooms_many, auser_rooms_many = _sync(_user_rooms_many), _async(_user_rooms_many)
history, ahistory = _sync(_history), _async(_history)

#: Every read, by name: the sync function, its async twin and the batched plan share it.
READS = {
    f.__name__.lstrip("_"): f
    for f in (
        _get,
        _get_many,
        _online,
        _online_page,
        _online_count,
        _room_members,
        _room_count,
        _room_sample,
        _rooms,
        _state_counts,
        _user_rooms_many,
        _history,
    )
}


class Reads:
    """Reads to run together in one round trip with :func:`batch`: each method takes the same
    arguments as the function of the same name and returns a plan, not a result."""

    def __getattr__(self, name: str) -> Callable[..., Read]:
        try:
            return READS[name]
        except KeyError:
            raise AttributeError(name) from None


def batch(*reads: Read) -> list[Any]:
    """Runs :class:`Reads` plans together: their first round trips as one, then each read's
    further steps (a policy call, a page that needs more) in turn. Their results in order.

    Example::

        r = presence.Reads()
        ids, counts = presence.batch(r.online(limit=50), r.state_counts())
    """
    store = get_store()
    firsts: list[Any] = []
    results: list[Any] = [None] * len(reads)
    for n, read in enumerate(reads):
        try:
            firsts.append(read.send(None))
        except StopIteration as done:
            firsts.append(None)
            results[n] = done.value
    planned = [(n, need) for n, need in enumerate(firsts) if callable(need)]
    replies = store.gather(*(need(store.planned) for _, need in planned)) if planned else []
    first_replies = dict(zip((n for n, _ in planned), replies, strict=True))
    for n, (read, need) in enumerate(zip(reads, firsts, strict=True)):
        if need is None:
            continue
        if isinstance(need, _Ask):
            reply = visibility.sight(need.viewer, need.ids, need.last_seen)
        else:
            reply = first_replies[n]
        results[n] = _drive(read, store, reply)
    return results
