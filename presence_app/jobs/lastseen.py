"""Durable last seen: ``LastSeen`` rows from offline transitions and from a periodic bulk flush.

Neither path runs per request or per heartbeat: an offline transition happens once per session,
and :func:`flush` copies every online user's last seen in pages of ``batch`` rows, one upsert
each (``presence flush``, every ``FLUSH_INTERVAL`` seconds).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction

from .. import presence
from ..core.rules import pk_of
from ..models import LastSeen
from ..store import MAX_DEVICE_LENGTH, UNAVAILABLE

logger = logging.getLogger("presence_app")

Row = tuple[str, datetime, str]  # (user id, last seen at, device)


def _pks(user_ids: Iterable[str]) -> dict[Any, str]:
    """{primary key: user id} of the ids that name existing users (Redis may know others)."""
    field = get_user_model()._meta.pk
    pks: dict[Any, str] = {}
    for uid in user_ids:
        try:
            pks[field.to_python(uid)] = uid
        except ValidationError:
            continue
    users = get_user_model()._default_manager.filter(pk__in=list(pks))
    return {pk: pks[pk] for pk in users.values_list("pk", flat=True)}


def record(rows: Iterable[Row], *, with_device: bool = True) -> int:
    """Upserts LastSeen rows in one query; ids of unknown users are skipped. Returns the count.

    ``with_device=False`` keeps the stored device (offline transitions do not carry one).
    """
    latest: dict[str, Row] = {}
    for row in rows:
        if row[0] not in latest or row[1] > latest[row[0]][1]:
            latest[row[0]] = row
    if not latest:
        return 0
    objs = [
        LastSeen(user_id=pk, last_seen_at=latest[uid][1], device=latest[uid][2][:MAX_DEVICE_LENGTH])
        for pk, uid in _pks(latest).items()
    ]
    LastSeen.objects.bulk_create(
        objs,
        update_conflicts=True,
        unique_fields=["user"],
        update_fields=["last_seen_at", "device"] if with_device else ["last_seen_at"],
    )
    return len(objs)


def flush(batch: int = 1000, now: float | None = None) -> int:
    """Copies the last seen of every (visibly) online user to LastSeen; returns the rows written.

    Pages through ``online()`` most recent first; a user moving up while paging may be written
    twice, one going offline meanwhile is written by the offline transition instead.
    """
    written, offset = 0, 0
    while True:
        # Invisible users are not listed, and their frozen last seen stays as it is.
        ids = presence.online(offset=offset, limit=batch, now=now, viewer=presence.TRUSTED)
        if not ids:
            return written
        presences = presence.get_many(ids, now=now, viewer=presence.TRUSTED)
        written += record(
            (uid, p.last_seen_at, p.device)
            for uid, p in presences.items()
            if p.is_online and p.state != "invisible" and p.last_seen_at is not None
        )
        if len(ids) < batch:
            return written
        offset += batch


def on_user_forgotten(sender: Any, *, user_id: str, **kwargs: Any) -> None:
    """Receiver of ``user_forgotten``: deletes the user's ``LastSeen`` row and memberships."""
    from ..models import RoomMembership

    pk = pk_of(user_id)
    if pk is not None:
        LastSeen.objects.filter(user_id=pk).delete()
        RoomMembership.objects.filter(user_id=pk).delete()


def stored_rows(user_id: str) -> dict[str, Any]:
    """The database's rows of ``user_id``: their last seen and their permanent rooms."""
    from ..models import RoomMembership

    pk = pk_of(user_id)
    row = LastSeen.objects.filter(user_id=pk).first() if pk is not None else None
    memberships = RoomMembership.objects.filter(user_id=pk) if pk is not None else []
    return {
        "last_seen": None
        if row is None
        else {"at": row.last_seen_at.isoformat(), "device": row.device},
        "permanent_rooms": [
            {"room": m.room, "joined_at": m.joined_at.isoformat()} for m in memberships
        ],
    }


def on_user_deleted(sender: Any, *, instance: Any, **kwargs: Any) -> None:
    """Receiver of the user model's ``post_delete``: the user is forgotten once the deletion
    commits. Redis away does not stop a deletion: the keys expire by themselves."""
    uid = str(instance.pk)

    def forget() -> None:
        try:
            presence.forget(uid)
        except UNAVAILABLE as exc:
            logger.warning("presence: could not erase deleted user %s from Redis: %s", uid, exc)

    transaction.on_commit(forget)


def on_user_offline(sender: Any, *, user_id: str, at: float | datetime, **kwargs: Any) -> None:
    """Receiver of ``user_offline``: the moment the public last saw the user becomes durable."""
    when = at if isinstance(at, datetime) else datetime.fromtimestamp(float(at), tz=UTC)
    record([(str(user_id), when, "")], with_device=False)
