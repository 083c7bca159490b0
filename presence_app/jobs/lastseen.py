"""Durable last seen: ``LastSeen`` rows from offline transitions and from a periodic bulk flush.

Neither path runs per request or per heartbeat: an offline transition happens once per session,
and :func:`flush` copies every online user's last seen in pages of ``batch`` rows, one upsert
each (``presence flush``, every ``FLUSH_INTERVAL`` seconds).

Every row is a workspace's (:mod:`presence_app.tenants`): written into the current one, where
the last seen came from (the sweeper flushes each workspace inside it, and ``sweeper.flush_all``
visits them all), and erased and exported workspace by workspace.
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
from ..core import tenants
from ..models import LastSeen, forget_rows, rows_of
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
    """Upserts LastSeen rows of the current workspace in one query; ids of unknown users are
    skipped. Returns the count.

    ``with_device=False`` keeps the stored device (offline transitions do not carry one).
    """
    latest: dict[str, Row] = {}
    for row in rows:
        if row[0] not in latest or row[1] > latest[row[0]][1]:
            latest[row[0]] = row
    if not latest:
        return 0
    workspace = tenants.column()  # the workspace the last seens were read in
    objs = [
        LastSeen(
            workspace=workspace,
            user_id=pk,
            last_seen_at=latest[uid][1],
            device=latest[uid][2][:MAX_DEVICE_LENGTH],
        )
        for pk, uid in _pks(latest).items()
    ]
    LastSeen.objects.bulk_create(
        objs,
        update_conflicts=True,
        unique_fields=["workspace", "user"],
        update_fields=["last_seen_at", "device"] if with_device else ["last_seen_at"],
    )
    return len(objs)


def flush(batch: int = 1000, now: float | None = None) -> int:
    """Copies the last seen of every (visibly) online user of the current workspace to its
    LastSeen rows; returns the rows written.

    Pages through the online list most recent first, each page read on from the last one's
    position (a page costs its own size, however deep); a user moving up while paging may be
    written twice, one going offline meanwhile is written by the offline transition instead.
    """
    written, cursor = 0, None
    while True:
        # Invisible users are not listed, and their frozen last seen stays as it is.
        ids, cursor = presence.online_page(batch, cursor, now=now, viewer=presence.TRUSTED)
        if not ids:
            return written
        presences = presence.get_many(ids, now=now, viewer=presence.TRUSTED)
        written += record(
            (uid, p.last_seen_at, p.device)
            for uid, p in presences.items()
            if p.is_online and p.state != "invisible" and p.last_seen_at is not None
        )
        if cursor is None:
            return written


def on_user_forgotten(sender: Any, *, user_id: str, **kwargs: Any) -> None:
    """Receiver of ``user_forgotten`` (sent inside the workspace the user was erased from):
    deletes their ``LastSeen`` row, memberships and privacy choice of that workspace."""
    forget_rows(user_id)


#: The database's rows of a user in the current workspace (``presence export`` prints them).
stored_rows = rows_of


def on_user_deleted(sender: Any, *, instance: Any, **kwargs: Any) -> None:
    """Receiver of the user model's ``post_delete``: the user is forgotten, in every workspace
    (``presence.forget`` visits them all), once the deletion commits; their rows went with the
    user (CASCADE, every workspace's). Redis away does not stop a deletion: the keys expire by
    themselves."""
    uid = str(instance.pk)

    def forget() -> None:
        try:
            presence.forget(uid)
        except UNAVAILABLE as exc:
            logger.warning("presence: could not erase deleted user %s from Redis: %s", uid, exc)

    transaction.on_commit(forget)


def on_user_offline(sender: Any, *, user_id: str, at: float | datetime, **kwargs: Any) -> None:
    """Receiver of ``user_offline`` (sent inside the workspace of the transition): the moment
    the public last saw the user there becomes durable there."""
    when = at if isinstance(at, datetime) else datetime.fromtimestamp(float(at), tz=UTC)
    record([(str(user_id), when, "")], with_device=False)
