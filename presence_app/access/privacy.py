"""Each user's choice of who sees their last seen, and how exactly (``LAST_SEEN_PRIVACY``).

A user may show their last seen to everyone who may see them, to their audience only (signed-in
viewers the ``AUDIENCE`` policy admits) or to nobody, and exactly or only roughly ("recently",
"within a week", "within a month", as Telegram shows it). With ``LAST_SEEN_RECIPROCAL`` a user
who shows theirs to nobody sees nobody's (as WhatsApp does). The choices are rows
(:class:`~presence_app.models.LastSeenPrivacy`), read in one query for a list and applied by
:mod:`presence_app.access.visibility`'s redaction; the user themself and ``TRUSTED`` reads (the
dashboard for superusers) see the truth. Online users show online whatever they chose.

A choice is made in a workspace and applies there (:mod:`presence_app.tenants`): its row
carries the workspace, and ``LastSeenPrivacy.objects`` reads and writes the current one's only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from .. import conf
from ..core import rules
from ..store import InvalidInput

EVERYONE, AUDIENCE, NOBODY = "everyone", "audience", "nobody"
#: The rough buckets of an approximate last seen, and how old each may be (seconds).
BUCKETS = (("recently", 3 * 86400), ("within_week", 7 * 86400), ("within_month", 30 * 86400))
LONG_AGO = "long_ago"


@dataclass(frozen=True)
class Choice:
    visible_to: str = EVERYONE
    approximate: bool = False


DEFAULT = Choice()


def enabled() -> bool:
    """Do users' choices apply (``LAST_SEEN_PRIVACY``)? Off, reads skip this module's query."""
    return bool(conf.get("LAST_SEEN_PRIVACY"))


def reciprocal() -> bool:
    return bool(conf.get("LAST_SEEN_RECIPROCAL"))


def _pks(user_ids: list[str]) -> dict[Any, str]:
    field = get_user_model()._meta.pk
    out = {}
    for uid in user_ids:
        try:
            out[field.to_python(uid)] = uid
        except ValidationError:
            continue
    return out


def choices(user_ids: list[str]) -> dict[str, Choice]:
    """The choices of the users among ``user_ids`` who made one in the current workspace: one
    query."""
    from ..models import LastSeenPrivacy

    pks = _pks(user_ids)
    if not pks:
        return {}
    rows = LastSeenPrivacy.objects.filter(user_id__in=list(pks))
    return {
        pks[pk]: Choice(visible_to, approximate)
        for pk, visible_to, approximate in rows.values_list("user_id", "visible_to", "approximate")
        if pk in pks
    }


achoices = sync_to_async(choices)


def check(visible_to: Any, approximate: Any) -> None:
    if visible_to is not None and visible_to not in (EVERYONE, AUDIENCE, NOBODY):
        raise InvalidInput('"last_seen" must be one of everyone, audience, nobody.')
    if approximate is not None and not isinstance(approximate, bool):
        raise InvalidInput('"approximate" must be true or false.')


def save(user: Any, visible_to: str | None = None, approximate: bool | None = None) -> Choice:
    """Stores ``user``'s choice in the current workspace (None keeps a part as it is); returns
    the whole choice."""
    from ..models import LastSeenPrivacy

    check(visible_to, approximate)
    uid = rules.user_id(user)
    pk = next(iter(_pks([uid])), None)
    if pk is None:
        raise InvalidInput("No such user.")
    row, _ = LastSeenPrivacy.objects.get_or_create(user_id=pk)
    if visible_to is not None:
        row.visible_to = visible_to
    if approximate is not None:
        row.approximate = approximate
    row.save()
    return Choice(row.visible_to, row.approximate)


asave = sync_to_async(save)


def bucket(last_seen: float, now: float) -> str:
    """The rough bucket of a last seen ``now - last_seen`` seconds ago."""
    age = now - last_seen
    for name, limit in BUCKETS:
        if age <= limit:
            return name
    return LONG_AGO
