"""The front door: ``from presence_app import presence``.

Every entry point goes through these functions: the WebSocket consumer and its mixin, the JSON
API, the middleware, the template tags, the admin dashboard, the sweeper, the ``presence``
command, and a project's own views, shells and tasks. Each call

1. validates its arguments once (:mod:`presence_app.rules`; a bad one raises
   :class:`~presence_app.store.InvalidInput`),
2. calls the store (one round trip, one Lua script per change), and
3. announces every transition it made, once: channel-layer events to the browsers that care and
   Django signals to Python code (:mod:`presence_app.dispatch`).

So ``presence.set_status(user, "dnd")`` from a view turns the user's dot red in every browser,
and ``presence.sweep()`` from a cron job fires ``user_offline`` (which writes ``LastSeen``).
Users may be given as user objects, primary keys or id strings. Each function has an ``a``-
prefixed twin for async code (``aget``, ``ajoin``, ...), the way Django names its own. Who may
enter a room is :func:`can_join` / :func:`acan_join` (the ``CAN_JOIN`` hook); whom a user's
presence is shown to is the ``AUDIENCE`` policy (:mod:`presence_app.audience`), applied by every
read given a ``viewer`` (``ANONYMOUS`` for a signed-out visitor; no viewer: the server's own read).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync

from . import audience, dispatch, hooks, rules
from .audience import ANONYMOUS
from .connection import get_async_store, get_store
from .store import InvalidInput, Presence, StateCounts, Transition

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


def _change(method: str, *args: Any, **kwargs: Any) -> list[Transition]:
    transitions = getattr(get_store(), method)(*args, **kwargs)
    dispatch.publish_sync(transitions)
    return transitions


async def _achange(method: str, *args: Any, **kwargs: Any) -> list[Transition]:
    transitions = await getattr(get_async_store(), method)(*args, **kwargs)
    await dispatch.publish(transitions)
    return transitions


# -- state changes: each returns (and has announced) the transitions it made -------------------
def touch(user: User, activity: bool = True, now: float | None = None) -> list[Transition]:
    """A sign of life outside a socket (an HTTP request): online for ``ONLINE_WINDOW``;
    ``activity`` also resets idle."""
    return _change("touch", rules.user_id(user), bool(activity), now)


def touch_many(items: Iterable[tuple[User, bool]], now: float | None = None) -> list[Transition]:
    """:func:`touch` for many ``(user, activity)`` pairs in one round trip (the middleware's
    background batch)."""
    pairs = [(rules.user_id(u), bool(a)) for u, a in items]
    return _change("touch_many", pairs, now) if pairs else []


def activity(user: User, now: float | None = None) -> list[Transition]:
    """The person did something on a live connection: resets idle, and only that."""
    return _change("activity", rules.user_id(user), now)


def connect(
    conn_id: str, user: User, now: float | None = None, device: str | None = None
) -> list[Transition]:
    """A connection (socket, stream) opened: it takes a lease of ``LEASE_TTL``."""
    return _change("connect", conn_id, rules.user_id(user), now, device)


def heartbeat(conn_id: str, user: User, now: float | None = None) -> bool:
    """Renews one lease; False when the connection holds none (connect it again). Sockets beat
    through the process' coalescer instead (:mod:`presence_app.coalescer`)."""
    return get_store().heartbeat(conn_id, rules.user_id(user), now)


def heartbeat_many(
    pairs: Iterable[tuple[str, User]], now: float | None = None
) -> list[tuple[str, str]]:
    """Renews many ``(conn_id, user)`` leases at once; returns the pairs that hold none (or
    whose user's listing was evicted): their sockets should connect again."""
    return get_store().heartbeat_many(pairs, now)


def disconnect(conn_id: str, user: User, now: float | None = None) -> list[Transition]:
    """A clean close: the lease is cut to ``DISCONNECT_GRACE``; the sweep announces the rest."""
    return _change("disconnect", conn_id, rules.user_id(user), now)


def join(room: str, conn_id: str, user: User, now: float | None = None) -> list[Transition]:
    """The connection enters ``room``. Raises UnknownConnection when it holds no lease.
    Authorisation is the caller's: entry points ask :func:`can_join` first."""
    return _change("join", rules.room(room), conn_id, rules.user_id(user), now)


def leave(room: str, conn_id: str, user: User, now: float | None = None) -> list[Transition]:
    """The connection leaves ``room`` (the user leaves it with their last connection there)."""
    return _change("leave", rules.room(room), conn_id, rules.user_id(user), now)


def set_status(
    user: User,
    state: str | None = None,
    message: str | None = None,
    emoji: str | None = None,
    *,
    expires_in: float | None = None,
    device: str | None = None,
    now: float | None = None,
    **meta: Any,
) -> list[Transition]:
    """Sets the user's override (``online``/``auto``, ``dnd``, ``invisible``; None keeps it),
    status message and emoji ("" clears, None keeps), optionally expiring after ``expires_in``
    seconds. Everybody who may see the user hears of it; the user's own sockets learn their
    true state (``invisible`` included)."""
    uid = rules.user_id(user)
    transitions = _change(
        "set_status",
        uid,
        now=now,
        **_status_args(state, message, emoji, expires_in, device),
        **meta,
    )
    dispatch.announce_self_sync(get_store().get(uid, viewer=uid, now=now))
    return transitions


def sweep(now: float | None = None) -> list[Transition]:
    """Evicts expired leases (crashed processes, ended graces) and announces the leaves and
    offlines; ``user_offline`` makes their last seen durable."""
    return _change("sweep", now)


# -- messages to a user's every device --------------------------------------------------------
#: A message rides the channel layer (channels-redis refuses ~1 MB): keep it well below.
MAX_USER_MESSAGE_BYTES = 64 * 1024


def _payload(payload: Any) -> Any:
    try:
        size = len(json.dumps(payload, allow_nan=False).encode())
    except (TypeError, ValueError):
        raise InvalidInput("the payload must be JSON: dicts, lists, strings, numbers") from None
    if size > MAX_USER_MESSAGE_BYTES:
        raise InvalidInput(f"the payload is limited to {MAX_USER_MESSAGE_BYTES} bytes of JSON")
    return payload


def send_to_user(user: User, payload: Any) -> None:
    """Delivers ``payload`` (JSON) to every open socket and SSE stream of ``user``, on every
    process (all their tabs and devices); the browsers get ``{"type": "presence.message",
    "payload": ...}`` (presence.js: the ``direct`` event). Nobody else receives it; a user with
    no open connection receives nothing (it is not stored)."""
    async_to_sync(asend_to_user)(user, payload)


async def asend_to_user(user: User, payload: Any) -> None:
    """:func:`send_to_user` for async code."""
    await dispatch.send_to_user(rules.user_id(user), _payload(payload))


# -- who may enter a room ---------------------------------------------------------------------
def can_join(user: Any, room: str) -> bool:
    """May ``user`` (a user object) enter, and so see, ``room``? The ``CAN_JOIN`` hook decides
    (sync or async); True without one. Entry points ask before :func:`join` or a room read."""
    return hooks.can_join(user, rules.room(room))


async def acan_join(user: Any, room: str) -> bool:
    """:func:`can_join` for async code."""
    return await hooks.acan_join(user, rules.room(room))


# -- reads ------------------------------------------------------------------------------------
def get(
    user: User, *, viewer: User | None = None, reveal_all: bool = False, now: float | None = None
) -> Presence:
    """One user's :class:`~presence_app.store.Presence` as ``viewer`` may see it (an invisible
    user reads as offline to everybody but themself; ``reveal_all`` is for superuser views).
    Outside the user's ``AUDIENCE`` the viewer reads them the same way."""
    uid = rules.user_id(user)
    vid, policy = _viewer_policy(viewer, reveal_all)
    found = get_store().get(uid, viewer=vid, reveal_all=reveal_all, now=now)
    return found if not policy or uid in audience.visible(vid, [uid]) else Presence(uid)


def get_many(
    users: Iterable[User],
    *,
    viewer: User | None = None,
    reveal_all: bool = False,
    now: float | None = None,
) -> dict[str, Presence]:
    """``{user_id: Presence}`` for any number of users, in one round trip, in the order given
    (and one ``AUDIENCE`` call)."""
    vid, policy = _viewer_policy(viewer, reveal_all)
    found = get_store().get_many(rules.user_ids(users), viewer=vid, reveal_all=reveal_all, now=now)
    return audience.mask(found, audience.visible(vid, found)) if policy else found


def online(
    window: float | None = None,
    offset: int = 0,
    limit: int | None = None,
    now: float | None = None,
    *,
    include_invisible: bool = False,
    viewer: User | None = None,
) -> list[str]:
    """Ids of online users, most recently seen first, paged by ``offset`` / ``limit``; with a
    ``viewer`` and an ``AUDIENCE`` policy, those the viewer may see (one call per 1,000)."""
    store = get_store()
    vid, policy = _viewer_policy(viewer)
    if not policy:
        return store.online(window, offset, limit, now, include_invisible=include_invisible)
    return audience.scan(
        lambda pos, n: store.online(window, pos, n, now, include_invisible=include_invisible),
        vid,
        offset,
        limit,
    )


def online_count(
    window: float | None = None, now: float | None = None, *, viewer: User | None = None
) -> int:
    """How many users are online (visible ones; with a ``viewer``, visible to them)."""
    vid, policy = _viewer_policy(viewer)
    if not policy:
        return get_store().online_count(window, now)
    return len(online(window, now=now, viewer=viewer))


def room_members(room: str, now: float | None = None, *, viewer: User | None = None) -> list[str]:
    """Ids of the visible users in ``room``, in the order they came (as ``viewer`` sees them)."""
    ids = get_store().room_members(rules.room(room), now)
    vid, policy = _viewer_policy(viewer)
    return audience.keep(ids, audience.visible(vid, ids)) if policy and ids else ids


def room_count(room: str, now: float | None = None, *, viewer: User | None = None) -> int:
    """How many visible users are in ``room`` (as ``viewer`` sees them)."""
    if _viewer_policy(viewer)[1]:
        return len(room_members(room, now, viewer=viewer))
    return get_store().room_count(rules.room(room), now)


def rooms(limit: int = 100, *, viewer: User | None = None) -> list[tuple[str, int]]:
    """The busiest occupied rooms, ``[(room, members)]``. With a ``viewer`` and an ``AUDIENCE``
    policy, of those, the rooms with members the viewer may see, counting only them (one round
    trip, one policy call a room)."""
    found = get_store().rooms(limit)
    if not _viewer_policy(viewer)[1] or not found:
        return found
    reads = Reads()
    members = batch(*(reads.room_members(room, viewer=viewer) for room, _ in found))
    counted = [(room, len(ids)) for (room, _), ids in zip(found, members, strict=True) if ids]
    return sorted(counted, key=lambda item: -item[1])


def state_counts(
    limit: int = 10_000, now: float | None = None, *, viewer: User | None = None
) -> StateCounts:
    """Online users by state (for dashboards), the states read for the ``limit`` most recently
    seen. With a ``viewer`` and an ``AUDIENCE`` policy, of the users the viewer may see."""
    if not _viewer_policy(viewer)[1]:
        return get_store().state_counts(limit, now)
    ids = online(now=now, viewer=viewer)
    # The ids are those the policy admitted (invisible users are not among them): their states
    # read as the public sees them, without asking the policy again.
    states = Counter(p.state for p in get_store().get_many(ids[:limit], now=now).values())
    return StateCounts(
        online=states["online"],
        idle=states["idle"],
        dnd=states["dnd"],
        total=len(ids),
        counted=min(len(ids), limit),
    )


def user_rooms_many(users: Iterable[User]) -> dict[str, list[str]]:
    """``{user_id: rooms}`` in one round trip (show it only where the user may be seen)."""
    return get_store().user_rooms_many(rules.user_ids(users))


def history(since: float) -> list[tuple[int, int]]:
    """The per-minute online samples since ``since``: ``[(minute, count)]``, oldest first."""
    return get_store().history(since)


class Reads:
    """Reads to run together in one round trip with :func:`batch`: each method takes the same
    arguments as the function of the same name and returns a plan, not a result."""

    def __init__(self) -> None:
        self._planned = get_store().planned

    def get_many(
        self,
        users: Iterable[User],
        *,
        viewer: User | None = None,
        reveal_all: bool = False,
        now: float | None = None,
    ) -> Any:
        vid, policy = _viewer_policy(viewer, reveal_all)
        plan = self._planned.get_many(
            rules.user_ids(users), viewer=vid, reveal_all=reveal_all, now=now
        )
        return (
            _Then(plan, lambda found: audience.mask(found, audience.visible(vid, found)))
            if policy
            else plan
        )

    def online(
        self,
        window: float | None = None,
        offset: int = 0,
        limit: int | None = None,
        now: float | None = None,
        *,
        include_invisible: bool = False,
        viewer: User | None = None,
    ) -> Any:
        vid, policy = _viewer_policy(viewer)
        if not policy:
            return self._planned.online(
                window, offset, limit, now, include_invisible=include_invisible
            )
        # The first chunk rides in the batch; a page that needs more reads on afterwards.
        store = get_store()

        def fetch(pos: int, n: int) -> list[str]:
            return store.online(window, pos, n, now, include_invisible=include_invisible)

        return _Then(
            self._planned.online(
                window, 0, audience.SCAN_CHUNK, now, include_invisible=include_invisible
            ),
            lambda first: audience.scan(fetch, vid, offset, limit, first),
        )

    def online_count(
        self, window: float | None = None, now: float | None = None, *, viewer: User | None = None
    ) -> Any:
        if not _viewer_policy(viewer)[1]:
            return self._planned.online_count(window, now)
        return _Then(self.online(window, now=now, viewer=viewer), len)

    def room_members(
        self, room: str, now: float | None = None, *, viewer: User | None = None
    ) -> Any:
        vid, policy = _viewer_policy(viewer)
        plan = self._planned.room_members(rules.room(room), now)
        return (
            _Then(plan, lambda ids: audience.keep(ids, audience.visible(vid, ids)))
            if policy
            else plan
        )

    def rooms(self, limit: int = 100) -> Any:
        return self._planned.rooms(limit)

    def state_counts(self, limit: int = 10_000, now: float | None = None) -> Any:
        return self._planned.state_counts(limit, now)

    def user_rooms_many(self, users: Iterable[User]) -> Any:
        return self._planned.user_rooms_many(rules.user_ids(users))

    def history(self, since: float) -> Any:
        return self._planned.history(since)


def batch(*plans: Any) -> list[Any]:
    """Runs :class:`Reads` plans in one round trip; their results in order.

    Example::

        r = presence.Reads()
        ids, counts = presence.batch(r.online(limit=50), r.state_counts())
    """
    results = get_store().gather(*(_Then.inner(p) for p in plans))
    return [p.finish(r) if isinstance(p, _Then) else r for p, r in zip(plans, results, strict=True)]


class _Then:
    """A read plan whose result is finished in Python after the round trip (the policy)."""

    def __init__(self, plan: Any, then: Any) -> None:
        self.plan, self.then = plan, then

    def finish(self, result: Any) -> Any:
        return self.then(self.plan.finish(result) if isinstance(self.plan, _Then) else result)

    @staticmethod
    def inner(plan: Any) -> Any:
        while isinstance(plan, _Then):
            plan = plan.plan
        return plan


def _viewer(viewer: User | None) -> str | None:
    return None if viewer is None or viewer is ANONYMOUS else rules.user_id(viewer)


def _viewer_policy(viewer: User | None, reveal_all: bool = False) -> tuple[str | None, bool]:
    """(the viewer's id for the store, whether the ``AUDIENCE`` policy applies to the read)."""
    vid = _viewer(viewer)
    return vid, viewer is not None and not reveal_all and audience.active()


# -- async twins ------------------------------------------------------------------------------
async def atouch(user: User, activity: bool = True, now: float | None = None) -> list[Transition]:
    return await _achange("touch", rules.user_id(user), bool(activity), now)


async def atouch_many(
    items: Iterable[tuple[User, bool]], now: float | None = None
) -> list[Transition]:
    pairs = [(rules.user_id(u), bool(a)) for u, a in items]
    return await _achange("touch_many", pairs, now) if pairs else []


async def aactivity(user: User, now: float | None = None) -> list[Transition]:
    return await _achange("activity", rules.user_id(user), now)


async def aconnect(
    conn_id: str, user: User, now: float | None = None, device: str | None = None
) -> list[Transition]:
    return await _achange("connect", conn_id, rules.user_id(user), now, device)


async def aheartbeat(conn_id: str, user: User, now: float | None = None) -> bool:
    return await get_async_store().heartbeat(conn_id, rules.user_id(user), now)


async def aheartbeat_many(
    pairs: Iterable[tuple[str, User]], now: float | None = None
) -> list[tuple[str, str]]:
    return await get_async_store().heartbeat_many(pairs, now)


async def adisconnect(conn_id: str, user: User, now: float | None = None) -> list[Transition]:
    return await _achange("disconnect", conn_id, rules.user_id(user), now)


async def ajoin(room: str, conn_id: str, user: User, now: float | None = None) -> list[Transition]:
    return await _achange("join", rules.room(room), conn_id, rules.user_id(user), now)


async def aleave(room: str, conn_id: str, user: User, now: float | None = None) -> list[Transition]:
    return await _achange("leave", rules.room(room), conn_id, rules.user_id(user), now)


async def aset_status(
    user: User,
    state: str | None = None,
    message: str | None = None,
    emoji: str | None = None,
    *,
    expires_in: float | None = None,
    device: str | None = None,
    now: float | None = None,
    **meta: Any,
) -> list[Transition]:
    uid = rules.user_id(user)
    transitions = await _achange(
        "set_status",
        uid,
        now=now,
        **_status_args(state, message, emoji, expires_in, device),
        **meta,
    )
    await dispatch.announce_self(await get_async_store().get(uid, viewer=uid, now=now))
    return transitions


async def asweep(now: float | None = None) -> list[Transition]:
    return await _achange("sweep", now)


async def aget(
    user: User, *, viewer: User | None = None, reveal_all: bool = False, now: float | None = None
) -> Presence:
    uid = rules.user_id(user)
    vid, policy = _viewer_policy(viewer, reveal_all)
    found = await get_async_store().get(uid, viewer=vid, reveal_all=reveal_all, now=now)
    return found if not policy or uid in await audience.avisible(vid, [uid]) else Presence(uid)


async def aget_many(
    users: Iterable[User],
    *,
    viewer: User | None = None,
    reveal_all: bool = False,
    now: float | None = None,
) -> dict[str, Presence]:
    vid, policy = _viewer_policy(viewer, reveal_all)
    found = await get_async_store().get_many(
        rules.user_ids(users), viewer=vid, reveal_all=reveal_all, now=now
    )
    return audience.mask(found, await audience.avisible(vid, found)) if policy else found


async def aonline(
    window: float | None = None,
    offset: int = 0,
    limit: int | None = None,
    now: float | None = None,
    *,
    include_invisible: bool = False,
    viewer: User | None = None,
) -> list[str]:
    store = get_async_store()
    vid, policy = _viewer_policy(viewer)
    if not policy:
        return await store.online(window, offset, limit, now, include_invisible=include_invisible)
    return await audience.ascan(
        lambda pos, n: store.online(window, pos, n, now, include_invisible=include_invisible),
        vid,
        offset,
        limit,
    )


async def aonline_count(
    window: float | None = None, now: float | None = None, *, viewer: User | None = None
) -> int:
    if not _viewer_policy(viewer)[1]:
        return await get_async_store().online_count(window, now)
    return len(await aonline(window, now=now, viewer=viewer))


async def aroom_members(
    room: str, now: float | None = None, *, viewer: User | None = None
) -> list[str]:
    ids = await get_async_store().room_members(rules.room(room), now)
    vid, policy = _viewer_policy(viewer)
    return audience.keep(ids, await audience.avisible(vid, ids)) if policy and ids else ids


async def aroom_count(room: str, now: float | None = None, *, viewer: User | None = None) -> int:
    if _viewer_policy(viewer)[1]:
        return len(await aroom_members(room, now, viewer=viewer))
    return await get_async_store().room_count(rules.room(room), now)
