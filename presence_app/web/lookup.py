"""Batched, request-scoped presence reads for the template tags and the admin.

A :class:`PresenceBatch` lives on the request: ``{% presence_prefetch users %}`` (or the admin's
change list) loads a whole page of users in one ``get_many`` round trip, and every dot or "last
seen" rendered afterwards is read from it. Users that Redis has nothing for fall back to their
``LastSeen`` row of the current workspace (``LastSeen.objects`` reads no other), again one query
for the whole batch. With Redis away everybody reads offline.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.http import HttpRequest

from .. import presence
from ..core import rules
from ..failopen import breaker
from ..store import UNAVAILABLE, Presence

ATTR = "_presence_batch"


def user_keys(users: Iterable[Any], attr: str = "") -> list[str]:
    """Ids of ``users``, or of ``item.<attr>`` for each item (``attr`` may be dotted)."""
    out = []
    for item in users or ():
        for part in attr.split(".") if attr else ():
            item = getattr(item, part, None)
        key = rules.user_key(item)
        if key is not None:
            out.append(key)
    return out


class PresenceBatch:
    """Presences read for one viewer (a user, ``ANONYMOUS``, or ``TRUSTED`` for superuser
    views), fetched in as few round trips as the page allows."""

    def __init__(self, viewer: Any = presence.ANONYMOUS) -> None:
        # The AUDIENCE answers of the prefetches, kept: the LastSeen fallback asks none again.
        self.viewer = presence.viewer(viewer)
        self.presences: dict[str, Presence] = {}
        self.durable: dict[str, datetime | None] = {}
        self.available = True

    def prefetch(self, user_ids: Iterable[str]) -> None:
        """Loads every id not loaded yet, in one round trip."""
        missing = [uid for uid in dict.fromkeys(user_ids) if uid not in self.presences]
        if not missing:
            return
        if self.available and not breaker.is_open:
            try:
                self.presences.update(presence.get_many(missing, viewer=self.viewer))
                return
            except UNAVAILABLE as exc:
                breaker.trip(exc, "a presence read")
        self.available = False
        self.presences.update((uid, Presence(uid)) for uid in missing)

    def get(self, uid: str) -> Presence:
        self.prefetch([uid])
        return self.presences[uid]

    def with_last_seen(self, uid: str) -> Presence:
        """``uid``'s presence with the LastSeen row's last seen where Redis has none (one query
        for all users still missing), as the viewer may see it: with Redis away too, the policy
        and the users' privacy decide."""
        p = self.get(uid)
        if p.last_seen is None and uid not in self.durable:
            from ..models import LastSeen

            wanted = {
                rules.pk_of(u): u
                for u, q in self.presences.items()
                if q.last_seen is None and u not in self.durable
            }
            wanted.pop(None, None)
            self.durable.update(dict.fromkeys(wanted.values()))
            # The current workspace's rows only: another workspace's activity is not this one's.
            rows = LastSeen.objects.filter(user_id__in=list(wanted))
            for pk, at in rows.values_list("user_id", "last_seen_at"):
                self.durable[wanted[pk]] = at
            # the page's fallbacks at once (one AUDIENCE call, one privacy query), redacted by
            # the front door
            missing = {u: self.presences[u] for u in wanted.values()}
            self.presences.update(
                presence.with_last_seen(missing, self.durable, viewer=self.viewer)
            )
        return self.presences[uid]


def batch_for(request: HttpRequest | None, holder: Any = None) -> PresenceBatch:
    """The batch of ``request`` (as seen by its user), created on first use.

    Without a request (a template rendered outside a view) ``holder`` keeps it instead.
    """
    owner = request if request is not None else holder
    batch = getattr(owner, ATTR, None) if owner is not None else None
    if batch is None:
        user = getattr(request, "user", None)
        signed_in = getattr(user, "is_authenticated", False)
        # A visitor is somebody too: the AUDIENCE policy decides what they see.
        batch = PresenceBatch(user if signed_in else presence.ANONYMOUS)
        if owner is not None:
            setattr(owner, ATTR, batch)
    return batch
