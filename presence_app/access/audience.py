"""Who may see whom: the ``AUDIENCE`` policy, asked once per list, never once per user.

``PRESENCE["AUDIENCE"]`` names a function (a callable or a dotted path, sync or async)::

    def audience(viewer: str | None, user_ids: list[str]) -> Iterable[str]:
        '''The ids among ``user_ids`` whose presence ``viewer`` may see.'''

``viewer`` is the reader's user id, or None for a signed-out visitor. Unset, everybody sees
everybody (:func:`everyone`). A user always sees themself; ``TRUSTED`` reads skip the policy.
What the answer hides, and how, is :mod:`presence_app.access.visibility`'s one redaction.

A connection remembers its answers for ``AUDIENCE_CACHE_SECONDS`` (:class:`Decisions`, kept by
its viewer), so the events of a room or a watch list cost no call: a few hundred of them, the
least recently used forgotten first. What every signed-out visitor reads alike (the online count
and list under a policy) a process shares for ``SHARED_SECONDS`` (:data:`shared`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver

from .. import conf
from ..core import hooks


class _Anonymous:
    """The viewer of a signed-out request: the policy is asked with ``None``."""

    def __repr__(self) -> str:
        return "presence.ANONYMOUS"


#: Pass as ``viewer=`` for a signed-out visitor (a read that names no viewer reads as one).
ANONYMOUS: Any = _Anonymous()

#: How many online ids one policy call filters when an online list or count is read for a viewer
#: (``AUDIENCE_SCAN_LIMIT`` bounds how many one read filters; each chunk goes on from the last).
SCAN_CHUNK = 1000

#: How long a process shares a signed-out visitor's online count and list under a policy with
#: every other signed-out visitor of the workspace (the policy answers them all alike: one scan
#: serves a page view after another), and how many such answers it keeps.
SHARED_SECONDS = 5.0
SHARED_ENTRIES = 256


class Shared:
    """Answers every signed-out visitor reads alike (``presence.online_count`` and
    ``presence.online`` under a policy), kept ``SHARED_SECONDS`` by this process: at most
    ``SHARED_ENTRIES``, the oldest forgotten first; forgotten when ``PRESENCE`` changes."""

    def __init__(self) -> None:
        self.entries: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        """The answer kept for ``key``, or None."""
        with self.lock:
            entry = self.entries.get(key)
            if entry is None or time.monotonic() - entry[0] > SHARED_SECONDS:
                return None
            return entry[1]

    def put(self, key: Hashable, value: Any) -> None:
        with self.lock:
            self.entries.pop(key, None)
            self.entries[key] = (time.monotonic(), value)
            while len(self.entries) > SHARED_ENTRIES:
                self.entries.popitem(last=False)

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()


shared = Shared()


@receiver(setting_changed)
def _forget_shared(*, setting: str, **kwargs: Any) -> None:
    if setting == "PRESENCE":
        shared.clear()  # another policy, another site: nothing kept answers for it


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
    """One viewer's answers, remembered for ``AUDIENCE_CACHE_SECONDS``: at most
    ``max_entries``, the least recently used forgotten first. A connection keeps a few hundred
    for its life (``session.AUDIENCE_ANSWERS``); a request's lists may hold more, for a moment."""

    def __init__(self, max_entries: int = 20_000) -> None:
        self.seen: OrderedDict[str, tuple[bool, float]] = OrderedDict()
        self.max_entries = max(1, int(max_entries))

    def known(self, ids: list[str]) -> tuple[set[str], list[str]]:
        """(ids known to be visible, ids to ask about)."""
        ttl = float(conf.get("AUDIENCE_CACHE_SECONDS"))
        now = time.monotonic()
        allowed, unknown = set(), []
        for uid in ids:
            entry = self.seen.get(uid)
            if entry is None or now - entry[1] > ttl:
                unknown.append(uid)
                continue
            self.seen.move_to_end(uid)  # used: the last to be forgotten
            if entry[0]:
                allowed.add(uid)
        return allowed, unknown

    def remember(self, asked: list[str], allowed: set[str]) -> None:
        now = time.monotonic()
        seen = self.seen
        for uid in asked:
            seen[uid] = (uid in allowed, now)
            seen.move_to_end(uid)
        while len(seen) > self.max_entries:
            seen.popitem(last=False)


def _split(
    viewer: str | None, ids: list[str], decisions: Decisions | None
) -> tuple[set[str], list[str]]:
    """(ids known to be visible, ids to ask the policy about)."""
    mine = {viewer} & set(ids) if viewer is not None else set()
    others = [uid for uid in ids if uid not in mine]
    if decisions is None or not others:
        return mine, others
    allowed, unknown = decisions.known(others)
    return mine | allowed, unknown


def _answer(asked: list[str], result: Iterable[Any], decisions: Decisions | None) -> set[str]:
    allowed = {str(uid) for uid in result} & set(asked)
    if decisions is not None:
        decisions.remember(asked, allowed)
    return allowed


def visible(
    viewer: str | None, user_ids: Iterable[str], decisions: Decisions | None = None
) -> set[str]:
    """The ids among ``user_ids`` that ``viewer`` may see: one policy call for the list, none
    for the ids ``decisions`` remembers."""
    ids = list(user_ids)
    if not active():
        return set(ids)
    allowed, ask = _split(viewer, ids, decisions)
    if ask:
        allowed |= _answer(ask, hooks.call("AUDIENCE", viewer, ask, then=list), decisions)
    return allowed


async def avisible(
    viewer: str | None, user_ids: Iterable[str], decisions: Decisions | None = None
) -> set[str]:
    """:func:`visible` for async code (a sync policy runs in a thread: it may use the ORM)."""
    ids = list(user_ids)
    if not active():
        return set(ids)
    allowed, ask = _split(viewer, ids, decisions)
    if ask:
        answer = await hooks.acall("AUDIENCE", viewer, ask, then=list)
        allowed |= _answer(ask, answer, decisions)
    return allowed
