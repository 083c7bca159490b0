"""``{% load presence %}``: dots, "last seen", counts and lists, batched per request.

``{% presence_prefetch users %}`` before a loop makes every ``{% presence_dot %}`` and
``{% last_seen %}`` of those users free: one Redis round trip for the whole list. Without it each
tag reads its own user (one round trip each). Invisible users read as offline to everybody but
themselves; with Redis away everybody reads offline and the page still renders.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape
from typing import Any

from django import template
from django.contrib.humanize.templatetags.humanize import naturaltime
from django.utils import translation
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from .. import presence
from ..failopen import breaker
from ..lookup import PresenceBatch, batch_for, user_key, user_keys, users_in_order
from ..store import UNAVAILABLE, Presence

register = template.Library()

LABELS = {
    "online": gettext_lazy("Online"),
    "idle": gettext_lazy("Away"),
    "dnd": gettext_lazy("Do not disturb"),
    "offline": gettext_lazy("Offline"),
    "invisible": gettext_lazy("Invisible"),
}


def _batch(context: template.Context) -> PresenceBatch:
    return batch_for(context.get("request"), holder=context)


@lru_cache(maxsize=256)
def _label(state: str, language: str | None) -> str:
    """A state's label in a language: translated once, not once per dot."""
    with translation.override(language):
        return str(LABELS.get(state, state))


def state_label(presence: Presence) -> str:
    label = _label(presence.state, translation.get_language())
    if not (presence.is_online and (presence.emoji or presence.message)):
        return label
    status = " ".join(part for part in (presence.emoji, presence.message) if part)
    return f"{label}: {status}"


def dot_html(presence: Presence) -> SafeString:
    """The dot of one presence; presence.js keeps its class, title and aria-label live.

    Each value escaped once, by the function Django's ``escape`` calls: ``format_html`` would
    run its four arguments through Django's lazy-text wrappers, most of a 200-dot page's time.
    """
    label = escape(state_label(presence))
    return mark_safe(  # every value is escaped above or here
        f'<span class="presence-dot presence-{escape(presence.state)}" '
        f'data-presence-user="{escape(presence.user_id)}" role="img" '
        f'title="{label}" aria-label="{label}"></span>'
    )


def last_seen_text(presence: Presence, seen: Any) -> str:
    if presence.is_online:
        return _("online now")
    if seen is None:
        return _("not seen yet")
    return _("last seen %(when)s") % {"when": naturaltime(seen)}


@register.simple_tag(takes_context=True)
def presence_prefetch(context: template.Context, users: Any, attr: str = "") -> str:
    """Loads the presence of every user in ``users`` (or of ``item.<attr>``) in one round trip.

    ``attr`` may name the foreign key's id (``"author_id"``) to spare the database a query.
    """
    _batch(context).prefetch(user_keys(users, attr))
    return ""


@register.simple_tag(takes_context=True)
def presence_dot(context: template.Context, user: Any) -> str:
    """The dot of a user (object or id), or of a Presence already read."""
    if isinstance(user, Presence):
        return dot_html(user)
    uid = user_key(user)
    return "" if uid is None else dot_html(_batch(context).get(uid))


@register.simple_tag(takes_context=True)
def presence_of(context: template.Context, user: Any) -> Presence | None:
    """A user's Presence (state, message, emoji, last seen ...), from the request's batch:
    ``{% presence_of user as p %}{{ p.emoji }} {{ p.message }}``."""
    uid = user_key(user)
    return None if uid is None else _batch(context).get(uid)


@register.filter
def presence_label(presence: Presence) -> str:
    """ "Online", "Away: 📅 In a meeting", ... of a Presence."""
    return state_label(presence) if isinstance(presence, Presence) else ""


@register.filter
def presence_ago(value: Any) -> Any:
    """ "3 minutes ago" of a datetime (humanize's ``naturaltime``), without
    ``django.contrib.humanize`` in ``INSTALLED_APPS``."""
    return naturaltime(value)


@register.filter
def presence_state(presence: Presence) -> str:
    """ "Online", "Away", ... of a Presence: the state alone."""
    return str(LABELS.get(presence.state, presence.state)) if isinstance(presence, Presence) else ""


@register.simple_tag(takes_context=True)
def last_seen(context: template.Context, user: Any) -> str:
    """ "online now", "last seen 3 minutes ago" (Redis, else the LastSeen row) or "not seen yet"."""
    uid = user_key(user)
    if uid is None:
        return ""
    batch = _batch(context)
    return last_seen_text(batch.get(uid), batch.last_seen(uid))


def _read(default: Any, fn: Any, *args: Any) -> Any:
    """A store read that fails open to ``default``."""
    if breaker.is_open:
        return default
    try:
        return fn(*args)
    except UNAVAILABLE as exc:
        breaker.trip(exc, "a presence tag")
        return default


def _viewer(context: template.Context) -> Any:
    """The request's user as the ``AUDIENCE`` viewer (``ANONYMOUS`` when signed out)."""
    return _batch(context).viewer


@register.simple_tag(takes_context=True)
def online_count(context: template.Context) -> int:
    """How many users are online (invisible ones, and those the viewer may not see, are not
    counted)."""
    return _read(0, lambda: presence.online_count(viewer=_viewer(context)))


@register.simple_tag(takes_context=True)
def online_users(context: template.Context, limit: int = 20) -> list[Any]:
    """The ``limit`` most recently seen online users (``{% online_users limit=10 as users %}``)."""
    ids = _read([], lambda: presence.online(limit=max(0, int(limit)), viewer=_viewer(context)))
    return users_in_order(ids)


@register.simple_tag(takes_context=True)
def room_members(context: template.Context, room: str) -> list[Any]:
    """Visible users in ``room`` in the order they came: ``{% room_members r as members %}``.
    Empty for a viewer ``CAN_JOIN`` keeps out of the room; a name no room can have raises
    InvalidInput, with the words every entry point uses."""
    user = getattr(context.get("request"), "user", None)
    if user is None or not presence.can_join(user, room):
        return []
    return users_in_order(_read([], lambda: presence.room_members(room, viewer=_viewer(context))))


@register.simple_tag(takes_context=True)
def room_roster(context: template.Context, room: str) -> list[Any]:
    """Every member of the permanent ``room``, offline ones too: ``{% room_roster r as
    members %}``, each with ``.user``, ``.presence`` and ``.last_seen`` (one query, one round
    trip; see presence_app/rooms.py). Empty for a viewer ``CAN_JOIN`` keeps out."""
    from .. import rooms

    user = getattr(context.get("request"), "user", None)
    if user is None or not presence.can_join(user, room):
        return []
    return _read([], lambda: rooms.members(room, viewer=_viewer(context)))
