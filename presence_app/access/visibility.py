"""Who may see what: every read states its viewer, and every output passes one redaction.

A read names its viewer (:func:`viewer_of`):

- a user (an object, a primary key or an id string): what the ``AUDIENCE`` policy lets them see;
- nothing, ``None`` or ``ANONYMOUS`` (a signed-out visitor): what the policy shows to nobody in
  particular. A read that does not say who reads never reveals more than that;
- ``TRUSTED``: the site's own code (a cron job, the dashboard for superusers, the last-seen
  flush): the truth, invisible users included. It has to be spelled out.

Whatever leaves the front door (a presence, a room's member list, an event to a browser, a
durable last seen read from the database) passes through :func:`redact` (and its forms for
lists, events and the database's last seen) with a :class:`Sight` of the list: the ids the
``AUDIENCE`` policy admits and the users' last-seen privacy choices (:func:`sight` /
:func:`asight`: one policy call and one query a list). Someone outside a user's audience learns
of them nothing but "offline": no last seen, no status text, no room, no metadata. An invisible
user reads offline too, with the last seen they had when they went invisible. A user's last seen
shows as their privacy choice allows (:mod:`presence_app.access.privacy`); where it hides it
from the viewer (the user's choice, or the viewer's own with ``LAST_SEEN_RECIPROCAL``) it reads
"hidden", not as a never-seen account's none.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from operator import attrgetter
from typing import Any

from ..core import rules
from ..store import ONLINE_STATES, Presence
from . import audience, privacy


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


# -- what the policy and the privacy choices say about a list: one call, one query ----------------
@dataclass(frozen=True)
class Sight:
    """For one viewer and one list of users: the ids the ``AUDIENCE`` policy admits (None: no
    policy), the users' last-seen privacy choices, and whether the viewer is ``blind`` to
    everybody's last seen (``LAST_SEEN_RECIPROCAL``: they show theirs to nobody)."""

    allowed: set[str] | None = None
    privacy: dict[str, privacy.Choice] = field(default_factory=dict)
    blind: bool = False


CLEAR = Sight()
_STATE = attrgetter("state")  # a page's states read at C speed (redact_all)


def _asks_privacy(viewer: Viewer) -> bool:
    return not viewer.trusted and privacy.enabled()


def _privacy_ids(viewer: Viewer, ids: list[str]) -> list[str]:
    mine = [viewer.id] if viewer.id is not None and privacy.reciprocal() else []
    return [uid for uid in ids if uid != viewer.id] + mine


def _sight(viewer: Viewer, allowed: set[str] | None, choices: dict[str, Any]) -> Sight:
    own = choices.pop(viewer.id, None) if viewer.id is not None else None
    blind = own is not None and own.visible_to == privacy.NOBODY
    return Sight(allowed, choices, blind)


def sight(viewer: Viewer, ids: list[str], last_seen: bool = True) -> Sight:
    """What ``viewer`` may learn of ``ids``: one policy call, and one privacy query when their
    ``last_seen`` is to be shown (neither when not needed)."""
    if viewer.trusted or not ids:
        return CLEAR
    allowed = audience.visible(viewer.id, ids, viewer.decisions) if viewer.filtered else None
    ask = last_seen and _asks_privacy(viewer)
    return _sight(viewer, allowed, privacy.choices(_privacy_ids(viewer, ids)) if ask else {})


async def asight(viewer: Viewer, ids: list[str], last_seen: bool = True) -> Sight:
    """:func:`sight` for async code."""
    if viewer.trusted or not ids:
        return CLEAR
    filtered = viewer.filtered
    allowed = await audience.avisible(viewer.id, ids, viewer.decisions) if filtered else None
    ask = last_seen and _asks_privacy(viewer)
    return _sight(viewer, allowed, await privacy.achoices(_privacy_ids(viewer, ids)) if ask else {})


def needs_sight(viewer: Viewer, last_seen: bool = True) -> bool:
    """Does anything (a policy; privacy choices, for ``last_seen``) decide what this viewer
    sees?"""
    return viewer.filtered or (last_seen and _asks_privacy(viewer))


# -- the one redaction -------------------------------------------------------------------------
def shown(viewer: Viewer, uid: str, seen: Sight) -> bool:
    """May ``viewer`` learn anything of ``uid``?"""
    return viewer.sees_all_of(uid) or seen.allowed is None or uid in seen.allowed


#: ``last_seen_approx`` of a user whose choice hides their last seen from the viewer: shown as
#: "offline", never as "not seen yet" (which a never-seen account reads). It follows the choice,
#: not whether a last seen exists, so it tells nothing the choice does not.
HIDDEN = "hidden"


def _last_seen_shown(viewer: Viewer, uid: str, seen: Sight) -> str:
    """How ``viewer`` may see ``uid``'s last seen: "exact", "approximate" or "" (not at all)."""
    if viewer.sees_all_of(uid):
        return "exact"
    choice = seen.privacy.get(uid, privacy.DEFAULT)
    if seen.blind or choice.visible_to == privacy.NOBODY:
        return ""
    if choice.visible_to == privacy.AUDIENCE and viewer.id is None:
        return ""  # a signed-out visitor is nobody's audience
    return "approximate" if choice.approximate else "exact"


def redact(viewer: Viewer, p: Presence, seen: Sight, now: float | None = None) -> Presence:
    """``p`` as ``viewer`` may see it. Outside the audience: offline and nothing else. An
    offline user (an invisible one reads so) shows nobody but themself a status text, a device
    or metadata, so that the two read alike; and their last seen (and last activity) only as
    their privacy choice allows."""
    if viewer.sees_all_of(p.user_id):
        return p
    if not shown(viewer, p.user_id, seen):
        return Presence(p.user_id)
    if p.is_online:
        return p
    how = _last_seen_shown(viewer, p.user_id, seen)
    if how == "exact" and not (p.meta or p.message or p.emoji or p.device):
        return p
    approx = HIDDEN if not how else ""  # hidden by their choice: not "never seen"
    if how == "approximate" and p.last_seen is not None:
        approx = privacy.bucket(p.last_seen, time.time() if now is None else now)
    exact = how == "exact"
    return Presence(
        p.user_id,
        p.state,
        p.last_seen if exact else None,
        p.last_active if exact else None,
        last_seen_approx=approx,
    )


def redact_all(
    viewer: Viewer, presences: dict[str, Presence], seen: Sight, now: float | None = None
) -> dict[str, Presence]:
    if seen.allowed is None:  # no policy: everybody is shown, so an online presence as read
        # (redact's own answer for it, without a call a user on a page of dots)
        if ONLINE_STATES.issuperset(map(_STATE, presences.values())):
            return presences  # (a page of online users: the dict as it is, not a copy)
        return {
            uid: p if p.state in ONLINE_STATES else redact(viewer, p, seen, now)
            for uid, p in presences.items()
        }
    return {uid: redact(viewer, p, seen, now) for uid, p in presences.items()}


def offline_ids(presences: dict[str, Presence]) -> list[str]:
    """The users of ``presences`` who are not online, in order: none, at C speed, for a page of
    online users (a property call a user cost a page of dots ~10 us)."""
    if ONLINE_STATES.issuperset(map(_STATE, presences.values())):
        return []
    return [uid for uid, p in presences.items() if p.state not in ONLINE_STATES]


def redact_ids(viewer: Viewer, ids: list[str], seen: Sight) -> list[str]:
    """A list of users (online, in a room): the ones ``viewer`` may see, in order."""
    return [uid for uid in ids if shown(viewer, uid, seen)]


def redact_event(viewer: Viewer, event: dict[str, Any], seen: Sight) -> dict[str, Any] | None:
    """A ``presence.*`` event about ``event["user"]`` as ``viewer`` may receive it: None when
    it must not reach them. An offline user shows no status text, so an event saying they went
    offline (or invisible, which reads the same) carries none either, and its time (their last
    seen) only as their privacy choice allows."""
    subject = str(event.get("user", ""))
    if not shown(viewer, subject, seen):
        return None
    if event.get("state") != "offline":
        return event
    out = {**event, "message": "", "emoji": ""}
    if _last_seen_shown(viewer, subject, seen) != "exact":
        out["at"] = None
    return out


def redact_states(
    viewer: Viewer, states: list[dict[str, Any]], seen: Sight
) -> list[dict[str, Any]]:
    """Members' room states (``{"user", "conn", "data"}``) as ``viewer`` may receive them:
    only those of users the viewer may see."""
    if seen.allowed is None:
        return states  # no policy: ``shown`` holds for every user (a room's 20 Hz path)
    return [st for st in states if shown(viewer, str(st.get("user", "")), seen)]


def with_durable(
    viewer: Viewer, p: Presence, seen: Sight, durable: datetime | None, now: float | None = None
) -> Presence:
    """``p`` (already redacted) with the database's ``durable`` last seen where Redis has none,
    redacted again: never the row of a user ``viewer`` may not see (the flush writes it while
    the user is online, so "last seen 2 minutes ago" would say "online"), and only as exactly
    as their privacy choice allows."""
    if p.last_seen is not None or p.last_seen_approx or durable is None or p.is_online:
        return p
    return redact(viewer, replace(p, last_seen=durable.timestamp()), seen, now)
