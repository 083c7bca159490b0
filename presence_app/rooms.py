"""Three room flavours on one per-room presence set: permanent, ephemeral, reactive.

Every room is the same live set in Redis (who is in it right now, and their status); what
differs is what outlives the connections:

- **Ephemeral** (a live document): nothing. The first join creates the room, the last member's
  leave (or the end of their grace) removes it from :func:`presence.rooms`. Any name joined
  without more is one.
- **Reactive** (viewers of a page): the member list *is* the live presence set, status and all;
  ``presence.room_members`` and the ``presence.state`` / join / leave / update events are it.
- **Permanent** (a Slack channel): membership is a :class:`~presence_app.models.RoomMembership`
  row. With ``PERMANENT_ROOMS = True`` each connection of a member joins the room when it
  opens, without the client asking; :func:`members` lists every member, offline ones with their last seen,
  in one Redis round trip plus one query. Join with :func:`add_member` or a
  ``{"type": "join", "room": ..., "permanent": true}`` frame (REST: the same body).

Who may join is still ``CAN_JOIN``'s call, at every join; a membership does not bypass it.

A membership is a workspace's (:mod:`presence_app.tenants`): every function here reads and
writes the current workspace's rows only (``RoomMembership.objects``), and a member's last seen
in a roster is the one of that workspace. Entry points enter the connection's workspace first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db.models import OuterRef, Subquery

from . import conf, presence
from .core import dispatch, rules
from .store import InvalidInput, Presence


@dataclass(frozen=True)
class Member:
    """A permanent room's member: the user, their live presence, their last seen."""

    user: Any
    presence: Presence
    last_seen: datetime | None
    joined_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.presence.as_dict(),
            "username": self.user.get_username(),
            "last_seen_at": self.last_seen.isoformat() if self.last_seen else None,
            "joined_at": self.joined_at.isoformat(),
        }


def _membership() -> Any:
    from .models import RoomMembership  # the app registry is ready by the time this runs

    return RoomMembership


def add_member(user: Any, room: str) -> bool:
    """Makes ``user`` (an object or a primary key) a member of the permanent ``room``; their
    open connections join it now. False when they already were. ``CAN_JOIN`` is the caller's
    to ask (a frame asks it)."""
    return async_to_sync(aadd_member)(user, room)


async def aadd_member(user: Any, room: str, *, sender: str | None = None) -> bool:
    """:func:`add_member` for async code (``sender``: the channel that joined already)."""
    room = rules.room(room)
    created = await database_sync_to_async(_save)(user, room)
    if created is None:
        limit = int(conf.get("MAX_PERMANENT_ROOMS"))
        raise InvalidInput(f"A user may be a member of at most {limit} permanent rooms.")
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(
            dispatch.self_group(rules.user_id(user)),
            {"type": "presence.permanent", "room": room, "sender": sender},
        )
    return created


def _save(user: Any, room: str) -> bool | None:
    """True: a new membership; False: one already; None: the user has ``MAX_PERMANENT_ROOMS``."""
    rows = _membership().objects.filter(user_id=_pk(user))
    if rows.filter(room=room).exists():
        return False
    if rows.count() >= int(conf.get("MAX_PERMANENT_ROOMS")):
        return None
    return _membership().objects.get_or_create(user_id=_pk(user), room=room)[1]


def remove_member(user: Any, room: str) -> bool:
    """Ends the membership; the user's live connections leave the room now (as
    :func:`presence.revoke` does). False when there was none."""
    return async_to_sync(aremove_member)(user, room)


async def aremove_member(user: Any, room: str) -> bool:
    """:func:`remove_member` for async code."""
    room = rules.room(room)
    deleted, _ = await database_sync_to_async(
        _membership().objects.filter(user_id=_pk(user), room=room).delete
    )()
    if deleted:
        await presence.arevoke(user, room)
    return bool(deleted)


def member_rooms(user: Any) -> list[str]:
    """The permanent rooms of ``user``, by name."""
    return list(_membership().objects.filter(user_id=_pk(user)).values_list("room", flat=True))


def members(
    room: str, *, viewer: Any = presence.ANONYMOUS, offset: int = 0, limit: int | None = None
) -> list[Member]:
    """The members of the permanent ``room`` in the order they joined (``offset`` / ``limit``
    of them), online or not, with their presence and last seen as ``viewer`` may see them:
    one query, one Redis round trip, one ``AUDIENCE`` call."""
    from .models import LastSeen

    # The member's last seen in this workspace (the row's own), never another workspace's.
    durable = LastSeen.all_workspaces.filter(
        user=OuterRef("user"), workspace=OuterRef("workspace")
    ).values("last_seen_at")[:1]
    rows = list(
        _membership()
        .objects.filter(room=rules.room(room))
        .select_related("user")
        .annotate(durable_last_seen=Subquery(durable))
        .order_by("joined_at", "pk")[offset : None if limit is None else offset + limit]
    )
    ids = [rules.user_id(row.user) for row in rows]
    v = presence.viewer(viewer)  # the two reads below: one AUDIENCE call
    presences = presence.get_many(ids, viewer=v, activity=True) if ids else {}
    durable = {uid: row.durable_last_seen for row, uid in zip(rows, ids, strict=True)}
    presences = presence.with_last_seen(presences, durable, viewer=v)
    return [
        Member(row.user, presences[uid], presences[uid].last_seen_at, row.joined_at)
        for row, uid in zip(rows, ids, strict=True)
    ]


def member_count(room: str) -> int:
    """How many members the permanent ``room`` has."""
    return _membership().objects.filter(room=rules.room(room)).count()


async def apermanent_rooms_to_join(user: Any, skip: list[str]) -> list[str]:
    """What a connection opening for ``user`` joins by itself (none unless ``PERMANENT_ROOMS``)."""
    if not conf.get("PERMANENT_ROOMS"):
        return []
    names = await database_sync_to_async(member_rooms)(user)
    return [r for r in sorted(names) if r not in skip]


def _pk(user: Any) -> Any:
    return getattr(user, "pk", user)
