"""Who may learn what of whom: the rules of docs/visibility.md and docs/workspaces.md, stated as
a small plain-Python model for tests/access/test_visibility_model.py.

Nothing here imports presence_app or reads what it answers: each rule below is a sentence of the
docs (quoted where it decides something) turned into a few lines, so that the test's
expectations cannot drift with the product's output. The test drives the real site and this
model with the same steps and compares every output with what the model allows.

The world: users, each in several workspaces (``TENANT``), and in each workspace a person of
their own: never seen, gone (offline, with a last seen), or live (connected), with a status
override (``dnd``, ``invisible``), an idle flag, a status text, metadata, a device, the rooms
their connections are in, their permanent rooms and their last-seen privacy choice, and a
``LastSeen`` row. Across workspaces: the ``AUDIENCE`` relation (who may see whom), whether a
policy applies at all, ``LAST_SEEN_RECIPROCAL`` and ``CAN_JOIN``'s answers; the count-only rooms
(``COUNT_ONLY_ROOMS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The site's own reads (``presence.TRUSTED``): the truth, invisible users as such.
TRUSTED = "<trusted>"
#: States in which a user shows online to others ("invisible" reads as offline to them).
SHOWN_ONLINE = ("online", "idle", "dnd")
#: A field whose value the docs leave open (compared by nobody).
ANY = object()
#: Approximate last seens ("recently", "within a week", ...): the bucket and how old it may be.
BUCKETS = (("recently", 3 * 86400), ("within_week", 7 * 86400), ("within_month", 30 * 86400))
#: A last seen a choice hides from the viewer (docs/websocket.md, drf.md: "hidden").
HIDDEN = "hidden"
ROUGHLY = {
    HIDDEN: "offline",
    "recently": "last seen recently",
    "within_week": "last seen within a week",
    "within_month": "last seen within a month",
    "long_ago": "last seen a long time ago",
}


def bucket(age: float) -> str:
    for name, limit in BUCKETS:
        if age <= limit:
            return name
    return "long_ago"


@dataclass
class Person:
    """One user in one workspace."""

    presence: str = "never"  # never | gone | live
    override: str | None = None  # None (auto) | "dnd" | "invisible"
    idle: bool = False
    message: str = ""
    emoji: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    device: str = ""
    seen_at: float | None = None  # when the public last saw them (gone; invisible: when they hid)
    row_at: float | None = None  # their LastSeen row of this workspace
    conns: dict[str, set[str]] = field(default_factory=dict)  # connection -> its rooms
    privacy: tuple[str, bool] = ("everyone", False)  # (visible to, approximate)

    @property
    def kind(self) -> str:
        """online, idle, dnd, invisible (the truth, as the user and TRUSTED reads see it), or
        gone / never."""
        if self.presence != "live":
            return self.presence
        if self.override in ("invisible", "dnd"):
            return self.override
        return "idle" if self.idle else "online"

    @property
    def rooms(self) -> set[str]:
        return set().union(*self.conns.values()) if self.conns else set()


class World:
    """The model: ``people[workspace][uid]``, ``roster[workspace][room]`` (permanent members in
    the order they joined), and the site-wide relations."""

    def __init__(
        self,
        ids: list[str],
        workspaces: list[str | None],
        *,
        policy: bool,
        relation: dict[str | None, set[str]],
        reciprocal: bool,
        access: dict[tuple[str | None, str, str], bool],
        count_only: set[str] | None = None,
        sample: int = 0,
    ) -> None:
        self.ids = list(ids)
        self.count_only, self.sample = set(count_only or ()), sample
        self.workspaces = list(workspaces)
        self.policy, self.relation, self.reciprocal = policy, relation, reciprocal
        self.access = access
        self.people: dict[str | None, dict[str, Person]] = {
            ws: {uid: Person() for uid in ids} for ws in workspaces
        }
        self.roster: dict[str | None, dict[str, list[str]]] = {ws: {} for ws in workspaces}
        self.forgotten: set[str] = set()

    def person(self, ws: str | None, uid: str) -> Person:
        return self.people[ws][uid]

    # -- who may see whom ------------------------------------------------------------------
    def sees(self, viewer: str | None, subject: str) -> bool:
        """Whether ``viewer`` may learn anything of ``subject``: "by default every signed-in
        user may see everybody's presence"; under an ``AUDIENCE`` policy, those it admits for
        the viewer (None: a signed-out visitor); a user always sees themself, and TRUSTED reads
        see everybody."""
        if viewer == TRUSTED or viewer == subject or not self.policy:
            return True
        return subject in self.relation.get(viewer, set())

    def state(self, ws: str | None, viewer: str | None, subject: str) -> str:
        """The state ``viewer`` reads: "someone outside a user's audience sees them exactly as
        an invisible user: offline"; an invisible user reads as offline to everybody but
        themself and TRUSTED reads."""
        kind = self.person(ws, subject).kind
        if kind in ("gone", "never") or not self.sees(viewer, subject):
            return "offline"
        if kind == "invisible" and viewer not in (subject, TRUSTED):
            return "offline"
        return kind

    def shown_online(self, ws: str | None, viewer: str | None, subject: str) -> bool:
        return self.state(ws, viewer, subject) in SHOWN_ONLINE

    def shows_status(self, ws: str | None, viewer: str | None, subject: str) -> bool:
        """Whether ``viewer`` reads ``subject``'s status: "an offline user (an invisible one
        reads so) shows nobody but themself a status text, a device or metadata"; outside the
        audience: "no status text"."""
        if viewer in (subject, TRUSTED):
            return True
        return self.shown_online(ws, viewer, subject)

    def last_seen_how(self, ws: str | None, viewer: str | None, subject: str) -> str:
        """How ``viewer`` may learn when ``subject`` was last seen: "exact", "approximate" or
        "" (not at all). "Each user's last seen is theirs to show": to everyone who may see them,
        their audience ("signed-in viewers the policy admits") or nobody; exactly or roughly;
        "with LAST_SEEN_RECIPROCAL a user who shows theirs to nobody sees nobody's"; "the user
        themself and TRUSTED reads see the truth"; outside the audience: "no last seen"."""
        if viewer in (subject, TRUSTED):
            return "exact"
        if not self.sees(viewer, subject):
            return ""
        if self.reciprocal and viewer is not None:
            if self.person(ws, viewer).privacy[0] == "nobody":
                return ""
        visible_to, approximate = self.person(ws, subject).privacy
        if visible_to == "nobody" or (visible_to == "audience" and viewer is None):
            return ""
        return "approximate" if approximate else "exact"

    def may_join(self, ws: str | None, uid: str | None, room: str) -> bool:
        """``CAN_JOIN`` decides who may enter, and so see, a room (signed-out: nobody here);
        the site's hook answers per workspace."""
        return uid is not None and self.access.get((ws, uid, room), False)

    # -- what each read states -------------------------------------------------------------
    def presence(
        self,
        ws: str | None,
        viewer: str | None,
        subject: str,
        now: float,
        *,
        durable: bool = False,
        redis_away: bool = False,
    ) -> dict[str, Any]:
        """One presence as ``viewer`` reads it (the JSON shape); ``durable``: a read that falls
        back to the workspace's ``LastSeen`` row where Redis has no last seen (the tags, the
        roster), ``redis_away``: Redis cannot answer (everybody offline, the rows alone). A
        last seen is ``None``, ``ANY`` (there is one) or ``("at", t)``."""
        p = self.person(ws, subject)
        state = "offline" if redis_away else self.state(ws, viewer, subject)
        status = not redis_away and self.shows_status(ws, viewer, subject)
        out: dict[str, Any] = {
            "user": subject,
            "state": state,
            "message": p.message if status else "",
            "emoji": p.emoji if status else "",
            "meta": dict(p.meta) if status else {},
            "device": (p.device if state in SHOWN_ONLINE else ANY) if status else "",
        }
        if state != "offline":  # online (or invisible, to themself): seen now
            out.update(last_seen=ANY, last_active=ANY, last_seen_approx="")
            return out
        seen = None if redis_away else p.seen_at
        if seen is None and (durable or redis_away):
            seen = p.row_at  # "the LastSeen fallbacks, with Redis away too"
        how = self.last_seen_how(ws, viewer, subject)
        out["last_seen"] = ("at", seen) if how == "exact" and seen is not None else None
        out["last_active"] = ANY if how == "exact" and seen is not None else None
        approx = bucket(now - seen) if how == "approximate" and seen is not None else ""
        # "hidden" where a choice hides it from this viewer altogether, whether or not there
        # is a last seen to hide (read as "offline", not as a never-seen account's "not seen
        # yet"); outside the audience nothing at all. With Redis away only a row is redacted
        # (the read of Redis that would have marked it failed).
        if how == "" and self.sees(viewer, subject) and (not redis_away or seen is not None):
            approx = HIDDEN
        out["last_seen_approx"] = approx
        return out

    def last_seen_text(
        self, ws: str | None, viewer: str | None, subject: str, now: float, redis_away: bool
    ) -> tuple[str, float | None]:
        """The ``{% last_seen %}`` text: ("online now", None), (a rough text, None), ("ago", t)
        or ("not seen yet", None)."""
        p = self.presence(ws, viewer, subject, now, durable=True, redis_away=redis_away)
        if p["state"] != "offline":
            return "online now", None
        if p["last_seen_approx"]:
            return ROUGHLY[p["last_seen_approx"]], None
        if p["last_seen"] is None:
            return "not seen yet", None
        return "ago", p["last_seen"][1]

    def online(self, ws: str | None, viewer: str | None) -> set[str]:
        """Online lists and counts: "left out of online lists, counts and room members"
        (invisible users too, their own view included: they are not listed)."""
        return {s for s in self.ids if self.state(ws, viewer, s) in SHOWN_ONLINE}

    def present(self, ws: str | None, viewer: str | None, room: str) -> set[str]:
        """Who is in a room as ``viewer`` may know it: users with a connection in it who show
        online to the viewer ("left out of ... room members": invisible users too)."""
        return {
            s
            for s in self.ids
            if room in self.person(ws, s).rooms
            and self.person(ws, s).kind in SHOWN_ONLINE
            and self.sees(viewer, s)
        }

    def room_members(self, ws: str | None, viewer: str | None, room: str) -> set[str]:
        """A room's live members as listed to the viewer; a count-only room's to nobody but
        TRUSTED reads ("its members get its live count ... and never its list")."""
        if room in self.count_only and viewer != TRUSTED:
            return set()
        return self.present(ws, viewer, room)

    def room_count(self, ws: str | None, viewer: str | None, room: str) -> int:
        """How many are in a room: those the viewer may know of; a count-only room's "as a
        signed-out visitor counts its visible members (the same for every member)": invisible
        members never, hidden ones as the policy hides them from nobody in particular."""
        if room in self.count_only and viewer != TRUSTED:
            viewer = None
        return len(self.present(ws, viewer, room))

    def in_sample(self, ws: str | None, viewer: str | None, room: str, subject: str) -> bool:
        """May a count-only room's sample name ``subject`` to ``viewer``? Only a member the
        count counts ("the first who came and are online, as a signed-out visitor sees them")
        whom the viewer sees online too ("under AUDIENCE, as each viewer does")."""
        return subject in self.present(ws, None, room) and self.shown_online(ws, viewer, subject)

    def user_rooms(self, ws: str | None, viewer: str | None, subject: str) -> set[str]:
        """The rooms a viewer may learn ``subject`` is in (the admin dashboard's rows): none of
        a user who does not show online to them, and a count-only room only to themself."""
        if not self.shown_online(ws, viewer, subject) and viewer not in (subject, TRUSTED):
            return set()
        rooms = self.person(ws, subject).rooms
        return {r for r in rooms if r not in self.count_only or viewer in (subject, TRUSTED)}

    def permanent_members(self, ws: str | None, room: str) -> list[str]:
        """A permanent room's members (``RoomMembership`` rows of the workspace), in order."""
        return list(self.roster[ws].get(room, []))

    def typing_state(self, ws: str | None, viewer: str | None, subject: str) -> str | None:
        """What a typing of ``subject`` says to ``viewer`` ("online" or "dnd"), or None: it must
        not reach them ("an invisible user publishes none"; outside the audience: nothing)."""
        state = self.state(ws, viewer, subject)
        if state not in SHOWN_ONLINE:
            return None
        return "dnd" if state == "dnd" else "online"

    def publishes(self, ws: str | None, subject: str) -> bool:
        """May ``subject``'s typing or room state go out at all (visible and live)?"""
        return self.person(ws, subject).kind in SHOWN_ONLINE

    def event(self, ws: str | None, viewer: str | None, subject: str) -> dict[str, Any] | None:
        """The ``presence.update`` a viewer (not the subject) gets when ``subject``'s public
        presence changes: None when none may reach them ("no event about them reaches that
        viewer's sockets"); an offline one carries no status text, and its time only as the
        subject's privacy choice allows."""
        if not self.sees(viewer, subject):
            return None
        p, state = self.person(ws, subject), self.state(ws, viewer, subject)
        shown = state in SHOWN_ONLINE
        exact = self.last_seen_how(ws, viewer, subject) == "exact"
        return {
            "state": state,
            "message": p.message if shown else "",
            "emoji": p.emoji if shown else "",
            "at": ANY if shown or exact else None,
        }

    def public(self, ws: str | None, subject: str) -> tuple[str, str, str]:
        """What the public knows of ``subject`` (state, status text, emoji): a change of it is
        announced, none other."""
        p = self.person(ws, subject)
        if p.kind not in SHOWN_ONLINE:
            return ("offline", "", "")
        return (p.kind, p.message, p.emoji)

    def dashboard(self, ws: str | None, viewer: str) -> dict[str, Any]:
        """The live dashboard for staff who are not superusers: "read through their own viewer"
        (the lists, the per-state counts and the rooms' counts alike)."""
        online = self.online(ws, viewer)
        rooms = {
            room: self.room_count(ws, viewer, room)
            for room in {r for s in self.ids for r in self.person(ws, s).rooms}
            if self.may_join(ws, viewer, room)
        }
        return {
            "rows": online,
            "counts": {
                k: sum(self.state(ws, viewer, s) == k for s in online) for k in SHOWN_ONLINE
            },
            "rooms": {r: n for r, n in rooms.items() if n},
        }

    # -- what happens ------------------------------------------------------------------------
    def connect(self, ws: str | None, uid: str, conn: str, device: str = "") -> None:
        p = self.person(ws, uid)
        p.presence = "live"
        p.conns.setdefault(conn, set())
        if device:
            p.device = device

    def join(self, ws: str | None, uid: str, conn: str, room: str) -> None:
        self.person(ws, uid).conns[conn].add(room)

    def leave(self, ws: str | None, uid: str, conn: str, room: str) -> None:
        self.person(ws, uid).conns[conn].discard(room)

    def activity(self, ws: str | None, uid: str) -> None:
        self.person(ws, uid).idle = False

    def set_status(
        self,
        ws: str | None,
        uid: str,
        state: str | None,
        message: str | None,
        emoji: str | None,
        now: float,
    ) -> None:
        """``state``: "auto" (no override), "dnd", "invisible" or None (kept); texts: None
        kept. Going invisible freezes the last seen the public sees: "when they hid"."""
        p = self.person(ws, uid)
        was = p.kind
        if state is not None:
            p.override = None if state == "auto" else state
        if message is not None:
            p.message = message
        if emoji is not None:
            p.emoji = emoji
        if p.kind == "invisible" and was in SHOWN_ONLINE:
            p.seen_at = now

    def forget(self, uid: str) -> None:
        """Erasure: "presence.forget(user) ... deletes every key of theirs in Redis ... their
        LastSeen row, room memberships and privacy choice", in every workspace that may hold
        them."""
        self.forgotten.add(uid)
        for ws in self.workspaces:
            self.people[ws][uid] = Person()
            for members in self.roster[ws].values():
                if uid in members:
                    members.remove(uid)
