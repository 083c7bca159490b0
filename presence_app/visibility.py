"""Who may see what: every read states its viewer, and every output passes one redaction.

A read names its viewer (:func:`viewer_of`):

- a user (an object, a primary key or an id string): what the ``AUDIENCE`` policy lets them see;
- nothing, ``None`` or ``ANONYMOUS`` (a signed-out visitor): what the policy shows to nobody in
  particular. A read that does not say who reads never reveals more than that;
- ``TRUSTED``: the site's own code (a cron job, the dashboard for superusers, the last-seen
  flush): the truth, invisible users included. It has to be spelled out.

Whatever leaves the front door (a presence, a room's member list, an event to a browser, a
durable last seen read from the database) passes through :func:`redact` with the ids the policy
admitted (:func:`admitted` / :func:`aadmitted`, one policy call a list). Someone outside a user's
audience learns of them exactly what they learn of an invisible user: offline, no last seen, no
status text, no room, no metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import audience, rules
from .store import Presence


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"presence.{self.name}"


#: The viewer of a signed-out request; also what a read without a viewer reads as.
ANONYMOUS: Any = audience.ANONYMOUS
#: The site's own reads: no policy, invisible users shown as such. Spell it out.
TRUSTED: Any = _Sentinel("TRUSTED")


@dataclass(frozen=True)
class Viewer:
    """Who reads: ``id`` (None for a signed-out visitor), ``trusted``, and the policy's answers
    remembered for this viewer (a connection keeps one for its life)."""

    id: str | None = None
    trusted: bool = False
    decisions: audience.Decisions | None = field(default=None, compare=False)

    @property
    def store_args(self) -> dict[str, Any]:
        """How the store derives presences for this viewer (invisible users' own view)."""
        return {"viewer": self.id, "reveal_all": self.trusted}

    @property
    def filtered(self) -> bool:
        """Does the ``AUDIENCE`` policy decide what this viewer sees?"""
        return not self.trusted and audience.active()

    def sees_all_of(self, uid: str) -> bool:
        """The user themself, or the site's own code."""
        return self.trusted or uid == self.id


PUBLIC = Viewer()
SERVER = Viewer(trusted=True)


def viewer_of(value: Any = None, decisions: audience.Decisions | None = None) -> Viewer:
    """The :class:`Viewer` a read was given: a user, ``ANONYMOUS``/None, ``TRUSTED``, or a
    Viewer already made."""
    if isinstance(value, Viewer):
        return value
    if value is TRUSTED:
        return SERVER
    if value is None or value is ANONYMOUS or getattr(value, "is_authenticated", True) is False:
        return Viewer(decisions=decisions) if decisions is not None else PUBLIC
    return Viewer(rules.user_id(value), decisions=decisions)


# -- the policy's answer for a list: one call ----------------------------------------------------
def admitted(viewer: Viewer, ids: list[str]) -> set[str] | None:
    """The ids among ``ids`` that ``viewer`` may see; None when no policy filters them."""
    if not viewer.filtered:
        return None
    return audience.visible(viewer.id, ids, viewer.decisions)


async def aadmitted(viewer: Viewer, ids: list[str]) -> set[str] | None:
    """:func:`admitted` for async code."""
    if not viewer.filtered:
        return None
    return await audience.avisible(viewer.id, ids, viewer.decisions)


# -- the one redaction -------------------------------------------------------------------------
def shown(viewer: Viewer, uid: str, allowed: set[str] | None) -> bool:
    """May ``viewer`` learn anything of ``uid`` (given the policy's answer)?"""
    return viewer.sees_all_of(uid) or allowed is None or uid in allowed


def redact(viewer: Viewer, p: Presence, allowed: set[str] | None) -> Presence:
    """``p`` as ``viewer`` may see it. Outside the audience: offline and nothing else. An
    offline user (an invisible one reads so) carries no metadata to anybody but themself."""
    if viewer.sees_all_of(p.user_id):
        return p
    if not shown(viewer, p.user_id, allowed):
        return Presence(p.user_id)
    if not p.is_online and p.meta:
        return Presence(p.user_id, p.state, p.last_seen, p.last_active, "", "", "", {})
    return p


def redact_all(
    viewer: Viewer, presences: dict[str, Presence], allowed: set[str] | None
) -> dict[str, Presence]:
    return {uid: redact(viewer, p, allowed) for uid, p in presences.items()}


def redact_ids(viewer: Viewer, ids: list[str], allowed: set[str] | None) -> list[str]:
    """A list of users (online, in a room): the ones ``viewer`` may see, in order."""
    return [uid for uid in ids if shown(viewer, uid, allowed)]


def redact_event(
    viewer: Viewer, event: dict[str, Any], allowed: set[str] | None
) -> dict[str, Any] | None:
    """A ``presence.*`` event about ``event["user"]`` as ``viewer`` may receive it: None when
    it must not reach them. An offline user shows no status text, so an event saying they went
    offline (or invisible, which reads the same) carries none either."""
    subject = str(event.get("user", ""))
    if not shown(viewer, subject, allowed):
        return None
    if event.get("state") == "offline" and (event.get("message") or event.get("emoji")):
        return {**event, "message": "", "emoji": ""}
    return event


def last_seen(
    viewer: Viewer, p: Presence, allowed: set[str] | None, durable: datetime | None
) -> datetime | None:
    """The last seen to show of ``p`` (already redacted): Redis' when it has one, else the
    database's ``durable`` row. Never the row for a user ``viewer`` may not see: the flush
    writes it while the user is online, so "last seen 2 minutes ago" would say "online"."""
    if p.last_seen is not None:
        return p.last_seen_at
    return durable if shown(viewer, p.user_id, allowed) else None
