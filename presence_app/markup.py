"""How a presence reads as HTML and text: a dot, its label, "last seen ...", a person's name.
The template tags, the htmx stream and the admin draw them alike, from here. Each value is
escaped once; what a state shares in a language is made once (a page draws hundreds)."""

from __future__ import annotations

from functools import lru_cache
from html import escape
from typing import Any

from django.contrib.humanize.templatetags.humanize import naturaltime
from django.utils import translation
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from .store import ONLINE_STATES, Presence

LABELS = {
    "online": gettext_lazy("Online"),
    "idle": gettext_lazy("Away"),
    "dnd": gettext_lazy("Do not disturb"),
    "offline": gettext_lazy("Offline"),
    "invisible": gettext_lazy("Invisible"),
}


@lru_cache(maxsize=256)
def _label(state: str, language: str | None) -> str:
    """A state's label in a language: translated once, not once per dot."""
    with translation.override(language):
        return str(LABELS.get(state, state))


@lru_cache(maxsize=256)
def _dot_parts(state: str, language: str | None) -> tuple[str, str]:
    """The start of a dot of ``state`` (its class, escaped) and its label, escaped: once per
    state and language, not once per dot."""
    return f'<span class="presence-dot presence-{escape(state)}" ', escape(_label(state, language))


def state_label(presence: Presence) -> str:
    label = _label(presence.state, translation.get_language())
    if not (presence.is_online and (presence.emoji or presence.message)):
        return label
    status = " ".join(part for part in (presence.emoji, presence.message) if part)
    return f"{label}: {status}"


def dot_html(presence: Presence) -> SafeString:
    """The dot of one presence; presence.js keeps its class, title and aria-label live.

    Each value escaped once, by the function Django's ``escape`` calls (``format_html`` would
    run its arguments through Django's lazy-text wrappers); the parts a state shares in a
    language made once (:func:`_dot_parts`); an integer id needs no escaping.
    """
    state, uid = presence.state, presence.user_id
    start, label = _dot_parts(state, translation.get_language())
    emoji, message = presence.emoji, presence.message
    if (emoji or message) and state in ONLINE_STATES:
        status = f"{emoji} {message}" if emoji and message else emoji or message
        label = f"{label}: {escape(status)}"
    return SafeString(  # every value is escaped above or here
        f'{start}data-presence-user="{uid if uid.isdigit() else escape(uid)}" role="img" '
        f'title="{label}" aria-label="{label}"></span>'
    )


#: What an approximate last seen reads as (presence_app.access.privacy's buckets).
ROUGHLY = {
    "recently": gettext_lazy("last seen recently"),
    "within_week": gettext_lazy("last seen within a week"),
    "within_month": gettext_lazy("last seen within a month"),
    "long_ago": gettext_lazy("last seen a long time ago"),
    "hidden": gettext_lazy("offline"),  # their choice hides when: not "not seen yet"
}


def last_seen_text(presence: Presence) -> str:
    if presence.is_online:
        return _("online now")
    if presence.last_seen_approx:
        return str(ROUGHLY.get(presence.last_seen_approx, ""))
    if presence.last_seen is None:
        return _("not seen yet")
    return _("last seen %(when)s") % {"when": naturaltime(presence.last_seen_at)}


@lru_cache(maxsize=64)
def _last_seen_parts(language: str | None) -> tuple[str, str]:
    """The texts presence.js swaps in, as a span's attributes, and "online now", escaped: once
    per language, not once per tag."""
    with translation.override(language):
        texts = (
            f'data-presence-text-online="{escape(_("online now"))}" '
            f'data-presence-text-offline="{escape(_("last seen just now"))}" '
            f'data-presence-text-hidden="{escape(_("offline"))}" '
            f'data-presence-text-ago="{escape(_("last seen %(when)s"))}">'
        )
        return texts, escape(_("online now"))


def last_seen_html(presence: Presence) -> SafeString:
    """The "last seen" text in a span presence.js keeps live: "online now" when the user
    comes online, "last seen just now" when they go (both translated here, on the server)."""
    texts, online_now = _last_seen_parts(translation.get_language())
    uid = presence.user_id
    if presence.is_online:
        state, shown = "online", online_now
    else:
        state, shown = "offline", escape(last_seen_text(presence))
    return SafeString(  # every value is escaped here
        f'<span class="presence-last-seen" '
        f'data-presence-last-seen="{uid if uid.isdigit() else escape(uid)}" '
        f'data-presence-state="{state}" {texts}{shown}</span>'
    )


def display_name(user: Any) -> str:
    """A user's name for people: the full name if the model has one, else the username."""
    full = getattr(user, "get_full_name", None)
    name = full() if callable(full) else ""
    return str(name or (user.get_username() if hasattr(user, "get_username") else user))
