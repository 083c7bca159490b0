"""Who may see whom: the ``AUDIENCE`` policy, asked once per list, never once per user.

``PRESENCE["AUDIENCE"]`` names a function (a callable or a dotted path, sync or async)::

    def audience(viewer: str | None, user_ids: list[str]) -> Iterable[str]:
        '''The ids among ``user_ids`` whose presence ``viewer`` may see.'''

``viewer`` is the reader's user id, or None for a signed-out visitor. Unset, everybody sees
everybody (:func:`everyone`). A user always sees themself, and reads that pass no viewer (the
server's own: the sweeper's samples, the last-seen flush) or ``reveal_all`` skip the policy.
Someone outside a user's audience reads them exactly as an invisible user: offline, with no
last seen, status text or room; they are left out of online lists, counts and room members,
and their events are not relayed (:mod:`presence_app.session`).

A connection remembers its answers for ``AUDIENCE_CACHE_SECONDS`` (:class:`Decisions`, made
current with :func:`remembering`), so the events of a room or a watch list cost no call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from asgiref.sync import async_to_sync, iscoroutinefunction
from channels.db import database_sync_to_async

from . import conf, hooks
from .store import Presence


class _Anonymous:
    """The viewer of a signed-out request: the policy is asked with ``None``."""

    def __repr__(self) -> str:
        return "presence.ANONYMOUS"


#: Pass as ``viewer=`` for a signed-out visitor (``viewer=None`` means the server's own read).
ANONYMOUS: Any = _Anonymous()

#: How many online ids one policy call filters when an online list or count is read for a viewer.
SCAN_CHUNK = 1000


def everyone(viewer: str | None, user_ids: list[str]) -> list[str]:
    """The default policy: everybody sees everybody."""
    return user_ids


def contacts(contacts_of: Callable[[str | None], Iterable[Any]]) -> Callable[..., set[str]]:
    """A policy from ``contacts_of(viewer) -> ids``: a viewer sees their contacts only (one
    call per list). Mutual connections: return the ids that list the viewer back."""

    def policy(viewer: str | None, user_ids: list[str]) -> set[str]:
        known = {str(c) for c in contacts_of(viewer)} if viewer is not None else set()
        return known.intersection(user_ids)

    return policy


def active() -> bool:
    """Is a policy set? (Without one every read skips this module's work.)"""
    return hooks.hook("AUDIENCE") is not None


class Decisions:
    """One viewer's answers, remembered for ``AUDIENCE_CACHE_SECONDS`` (a connection's)."""

    def __init__(self, max_entries: int = 20_000) -> None:
        self.seen: dict[str, tuple[bool, float]] = {}
        self.max_entries = max_entries

    def known(self, ids: list[str]) -> tuple[set[str], list[str]]:
        """(ids known to be visible, ids to ask about)."""
        ttl = float(conf.get("AUDIENCE_CACHE_SECONDS"))
        now = time.monotonic()
        allowed, unknown = set(), []
        for uid in ids:
            entry = self.seen.get(uid)
            if entry is None or now - entry[1] > ttl:
                unknown.append(uid)
            elif entry[0]:
                allowed.add(uid)
        return allowed, unknown

    def remember(self, asked: list[str], allowed: set[str]) -> None:
        if len(self.seen) + len(asked) > self.max_entries:
            self.seen.clear()  # cheaper than an LRU: the next events ask again, in lists
        now = time.monotonic()
        for uid in asked:
            self.seen[uid] = (uid in allowed, now)


_current: ContextVar[tuple[str | None, Decisions] | None] = ContextVar(
    "presence_audience", default=None
)


@contextmanager
def remembering(viewer: str | None, decisions: Decisions) -> Iterator[Decisions]:
    """Reads for ``viewer`` inside this block use and fill ``decisions``."""
    token = _current.set((viewer, decisions))
    try:
        yield decisions
    finally:
        _current.reset(token)


def _split(viewer: str | None, ids: list[str]) -> tuple[set[str], list[str], Decisions | None]:
    mine = {viewer} & set(ids) if viewer is not None else set()
    others = [uid for uid in ids if uid not in mine]
    current = _current.get()
    if current is None or current[0] != viewer or not others:
        return mine, others, None
    allowed, unknown = current[1].known(others)
    return mine | allowed, unknown, current[1]


def _answer(asked: list[str], result: Iterable[Any], decisions: Decisions | None) -> set[str]:
    wanted = set(asked)
    allowed = {str(uid) for uid in result} & wanted
    if decisions is not None:
        decisions.remember(asked, allowed)
    return allowed


def visible(viewer: str | None, user_ids: Iterable[str]) -> set[str]:
    """The ids among ``user_ids`` that ``viewer`` may see: one policy call for the list."""
    ids = list(user_ids)
    check = hooks.hook("AUDIENCE")
    if check is None:
        return set(ids)
    allowed, ask, decisions = _split(viewer, ids)
    if ask:
        if iscoroutinefunction(check):
            result = async_to_sync(check)(viewer, ask)
        else:
            result = check(viewer, ask)
        allowed |= _answer(ask, result, decisions)
    return allowed


async def avisible(viewer: str | None, user_ids: Iterable[str]) -> set[str]:
    """:func:`visible` for async code (a sync policy runs in a thread: it may use the ORM)."""
    ids = list(user_ids)
    check = hooks.hook("AUDIENCE")
    if check is None:
        return set(ids)
    allowed, ask, decisions = _split(viewer, ids)
    if ask:
        if iscoroutinefunction(check):
            result = await check(viewer, ask)
        else:
            result = await database_sync_to_async(lambda: list(check(viewer, ask)))()
        allowed |= _answer(ask, result, decisions)
    return allowed


def mask(presences: dict[str, Presence], allowed: set[str]) -> dict[str, Presence]:
    """Users outside ``allowed`` read as offline, with nothing else (as invisible users do)."""
    return {uid: p if uid in allowed else Presence(uid) for uid, p in presences.items()}


def keep(ids: list[str], allowed: set[str]) -> list[str]:
    """``ids`` without the ones outside ``allowed``, in order."""
    return [uid for uid in ids if uid in allowed]


Fetch = Callable[[int, int], Any]  # (offset, limit) -> ids, or an awaitable of them (async)


def _take(chunk: list[str], allowed: set[str], skip: int, out: list[str], limit: int | None) -> int:
    for uid in chunk:
        if uid not in allowed:
            continue
        if skip:
            skip -= 1
        elif limit is None or len(out) < limit:
            out.append(uid)
    return skip


def scan(
    fetch: Fetch,
    viewer: str | None,
    offset: int = 0,
    limit: int | None = None,
    first: list[str] | None = None,
) -> list[str]:
    """The page ``offset``/``limit`` of a list (online users) as ``viewer`` may see it: read in
    chunks of ``SCAN_CHUNK``, one policy call a chunk, until the page is full (``first``: the
    first chunk, already read)."""
    out: list[str] = []
    pos, skip = 0, offset
    while limit is None or len(out) < limit:
        chunk = first if first is not None else fetch(pos, SCAN_CHUNK)
        first = None
        pos += len(chunk)
        if chunk:
            skip = _take(chunk, visible(viewer, chunk), skip, out, limit)
        if len(chunk) < SCAN_CHUNK:
            break
    return out


async def ascan(
    fetch: Fetch, viewer: str | None, offset: int = 0, limit: int | None = None
) -> list[str]:
    """:func:`scan` for async code (``fetch`` returns an awaitable)."""
    out: list[str] = []
    pos, skip = 0, offset
    while limit is None or len(out) < limit:
        chunk = await fetch(pos, SCAN_CHUNK)
        pos += len(chunk)
        if chunk:
            skip = _take(chunk, await avisible(viewer, chunk), skip, out, limit)
        if len(chunk) < SCAN_CHUNK:
            break
    return out
