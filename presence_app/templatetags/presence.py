"""``{% load presence %}``: dots, "last seen", counts and lists, batched per request.

``{% presence_prefetch users %}`` before a loop makes every ``{% presence_dot %}`` and
``{% last_seen %}`` of those users free: one Redis round trip for the whole list. Without it each
tag reads its own user (one round trip each). Invisible users read as offline to everybody but
themselves; with Redis away everybody reads offline and the page still renders.
"""

from __future__ import annotations

import dataclasses
from html import escape
from inspect import getfullargspec, signature, unwrap
from typing import Any

from django import template
from django.contrib.humanize.templatetags.humanize import naturaltime
from django.db.models import QuerySet
from django.template.library import SimpleNode, parse_bits
from django.urls import NoReverseMatch, reverse
from django.utils.html import conditional_escape
from django.utils.safestring import SafeData

from .. import presence
from ..core import dispatch
from ..core.rules import MAX_USER_ID_LENGTH, user_ids, user_key, users_in_order
from ..core.rules import room as room_name
from ..failopen import breaker
from ..jobs.touches import TOUCHED, is_activity
from ..markup import LABELS, display_name, dot_html, last_seen_html, last_seen_text, state_label
from ..store import UNAVAILABLE, InvalidInput, Presence
from ..web.lookup import ATTR, PresenceBatch, batch_for, user_keys

register = template.Library()


class PageTagNode(SimpleNode):
    """A simple tag a page repeats, once a user (a dot, a last seen): simple_tag's arguments
    and ``as``, resolved without a list and a dict a call, and the output escaped only when it
    is not safe already (``conditional_escape`` of a safe string is most of simple_tag's own
    time a call)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # ``{% presence_dot u %}``: the context's ``u``, no filter, no lookup (a page's usual)
        arg = self.args[0] if len(self.args) == 1 and not self.kwargs else None
        var = getattr(arg, "var", None)
        self.name = (
            var.lookups[0]
            if isinstance(var, template.Variable)
            and not arg.filters
            and var.lookups is not None
            and len(var.lookups) == 1
            and not var.translate
            else None
        )

    def render(self, context: template.Context) -> str:
        args, kwargs = self.args, self.kwargs
        if self.name is not None:
            try:
                value = context[self.name]
            except KeyError:  # as the template engine resolves it (string_if_invalid)
                value = args[0].resolve(context)
            if callable(value):  # the engine calls it (or does not): its own resolution
                value = args[0].resolve(context)
            output = self.func(context, value)
        elif len(args) == 1 and not kwargs:
            output = self.func(context, args[0].resolve(context))
        else:
            output = self.func(
                context,
                *[a.resolve(context) for a in args],
                **{k: v.resolve(context) for k, v in kwargs.items()},
            )
        if self.target_var is not None:
            context[self.target_var] = output
            return ""
        if context.autoescape and not isinstance(output, SafeData):
            return conditional_escape(output)
        return output


def page_tag(func: Any) -> Any:
    """Registers ``func(context, ...)`` as :func:`register.simple_tag` would (takes_context),
    compiled into a :class:`PageTagNode`."""
    params, varargs, varkw, defaults, kwonly, kwonly_defaults, _ = getfullargspec(unwrap(func))
    name = func.__name__
    params = params[1:]  # "context": the node passes it, as simple_tag's own does
    # Django 6.1's parse_bits lost its takes_context argument (simple_tag strips "context")
    old_parse = "takes_context" in signature(parse_bits).parameters
    taken: tuple[bool, ...] = (False,) if old_parse else ()

    def compile_func(parser: Any, token: Any) -> PageTagNode:
        bits = token.split_contents()[1:]
        target = None
        if len(bits) >= 2 and bits[-2] == "as":
            target, bits = bits[-1], bits[:-2]
        args, kwargs = parse_bits(
            parser, bits, params, varargs, varkw, defaults, kwonly, kwonly_defaults, *taken, name
        )
        return PageTagNode(func, True, args, kwargs, target)

    register.tag(name, compile_func)
    return func


def _batch(context: template.Context) -> PresenceBatch:
    return batch_for(context.get("request"), holder=context)


def _key(user: Any) -> str | None:
    """:func:`user_key` of a tag's argument, a user object's integer key at once."""
    pk = getattr(user, "pk", user)
    if type(pk) is int:
        text = str(pk)
        if len(text) <= MAX_USER_ID_LENGTH:
            return text
    return user_key(user)


def _presence(context: template.Context, uid: str) -> Presence:
    """``uid``'s presence from the request's batch; the request's own user is not offline.

    PresenceMiddleware writes a request's sign of life after the response (in a background
    batch), so the first page after logging in would read its own user as offline. When the
    request's own user reads offline on a request the middleware keeps them online by, the
    touch is written now (one round trip, once a request, only then) and read again: their
    true state (online, or the invisible or dnd they had set) on the very first page.
    """
    request = context.get("request")
    batch = getattr(request if request is not None else context, ATTR, None)
    if batch is None:
        batch = _batch(context)
    found = batch.presences.get(uid)
    if found is None:
        found = batch.get(uid)
    if (
        found.state != "offline"
        or uid != batch.viewer.id
        or not batch.available
        or getattr(request, TOUCHED, False) is not True
    ):
        return found
    setattr(request, TOUCHED, "written")  # once: the touch below is this request's
    try:
        presence.touch(uid, activity=is_activity(request))
        batch.presences.pop(uid, None)
        return batch.get(uid)
    except UNAVAILABLE as exc:
        breaker.trip(exc, "a presence tag")
        return found


@register.simple_tag(takes_context=True)
def presence_prefetch(context: template.Context, users: Any, attr: str = "") -> str:
    """Loads the presence of every user in ``users`` (or of ``item.<attr>``) in one round trip.

    ``attr`` may name the foreign key's id (``"author_id"``) to spare the database a query.
    """
    _batch(context).prefetch(_page_keys(users, attr))
    return ""


def _page_keys(users: Any, attr: str) -> list[str]:
    """:func:`user_keys` of a page: a list of users (one model's objects, keys) checked at once
    by the front door's rule (``rules.user_ids``), a key at a time only for anything else (an
    attribute, something that is no user: skipped)."""
    if not attr and isinstance(users, list | tuple | QuerySet):
        try:
            return user_ids(users)
        except InvalidInput:
            pass
    return user_keys(users, attr)


@page_tag
def presence_dot(context: template.Context, user: Any) -> str:
    """The dot of a user (object or id), or of a Presence already read."""
    if isinstance(user, Presence):
        return dot_html(user)
    uid = _key(user)
    return "" if uid is None else dot_html(_presence(context, uid))


@register.simple_tag(takes_context=True)
def presence_of(context: template.Context, user: Any) -> Presence | None:
    """A user's Presence (state, message, emoji, last seen ...), from the request's batch:
    ``{% presence_of user as p %}{{ p.emoji }} {{ p.message }}``."""
    uid = user_key(user)
    return None if uid is None else _presence(context, uid)


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


@page_tag
def last_seen(context: template.Context, user: Any, live: bool = True) -> str:
    """ "online now", "last seen 3 minutes ago" (Redis, else the LastSeen row) or "not seen yet",
    in a ``<span class="presence-last-seen">`` that presence.js keeps live (``live=False``: the
    text alone, e.g. for an attribute)."""
    uid = _key(user)
    if uid is None:
        return ""
    found = _presence(context, uid)  # the request's own user: online on their first page too
    batch = _batch(context)
    if found.last_seen is None or uid in batch.durable:  # Redis has none: the LastSeen row's
        found = batch.with_last_seen(uid)
    return last_seen_html(found) if live else last_seen_text(found)


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
    counted): exact without an ``AUDIENCE`` policy; under one, of the ``AUDIENCE_SCAN_LIMIT``
    most recently seen, and a signed-out visitor's shared for ``audience.SHARED_SECONDS``."""
    return _read(0, lambda: presence.online_count(viewer=_viewer(context)))


@register.simple_tag(takes_context=True)
def online_users(context: template.Context, limit: int = 20) -> list[Any]:
    """The ``limit`` most recently seen online users (``{% online_users limit=10 as users %}``)."""
    ids = _read([], lambda: presence.online(limit=max(0, int(limit)), viewer=_viewer(context)))
    return users_in_order(ids)


@register.simple_tag(takes_context=True)
def room_members(context: template.Context, room: str, others: bool = False) -> list[Any]:
    """Visible users in ``room`` in the order they came: ``{% room_members r as members %}``
    (``others=True``: without the viewer). Empty for a viewer ``CAN_JOIN`` keeps out of the
    room; a name no room can have raises InvalidInput, with the words every entry point uses.
    Alone, ``{% room_members r %}`` renders the live list (:class:`RoomMembers`)."""
    user = getattr(context.get("request"), "user", None)
    if user is None or not presence.can_join(user, room):
        return RoomMembers(room, [], context, others=bool(others))
    ids = _read([], lambda: presence.room_members(room, viewer=_viewer(context)))
    if others:
        ids = [uid for uid in ids if uid != _viewer(context).id]
    return RoomMembers(room, users_in_order(ids), context, others=bool(others))


class RoomMembers(list):
    """The users in a room now (``{% room_members r as members %}``: a list of users) that
    renders, used alone (``{% room_members r %}``), as a list presence.js keeps live while the
    page is in the room: each member's dot and name (``markup.display_name``), in the order
    they came; a member who joins later is named through the ``api-room-names`` endpoint (as the
    viewer may see them), and with ``others=True`` the viewer is never listed. A count-only
    room (``COUNT_ONLY_ROOMS``) renders nothing: its members see its count, never its list."""

    def __init__(
        self, room: str, users: list[Any], context: template.Context, *, others: bool
    ) -> None:
        super().__init__(users)
        self.room, self.others, self._context = room, others, context

    def __html__(self) -> str:
        if dispatch.count_only(room_name(self.room)):
            return ""
        context = self._context
        members = [(uid, u) for u in self if (uid := _key(u)) is not None]
        _batch(context).prefetch([uid for uid, _ in members])
        items = [
            f'<li class="presence-room-member" data-presence-room-member="{escape(uid)}">'
            f"{dot_html(_presence(context, uid))} "
            f'<span class="presence-room-member-name">{escape(display_name(u))}</span></li>'
            for uid, u in members
        ]
        try:
            url = reverse("presence_app:api-room-names", args=[self.room])
            names = f' data-presence-names-url="{escape(url)}"'
        except NoReverseMatch:  # the project did not include presence_app.urls
            names = ""
        others = " data-presence-others" if self.others else ""
        return (
            f'<ul class="presence-room-members" data-presence-room-members="{escape(self.room)}"'
            f"{names}{others}>{''.join(items)}</ul>"
        )

    def __str__(self) -> str:
        return self.__html__()


class Roster(list):
    """A permanent room's members (``{% room_roster r as members %}``: a list of
    :class:`~presence_app.rooms.Member`) that renders as a roster presence.js keeps live when
    the tag is used alone (``{% room_roster r %}``): each member's dot, name and "last seen",
    online members first."""

    def __init__(self, room: str, members: list[Any]) -> None:
        super().__init__(members)
        self.room = room

    def __html__(self) -> str:
        rows = sorted((not m.presence.is_online, n, m) for n, m in enumerate(self))
        items = []
        for _offline, n, m in rows:  # online first, then in the order they joined
            p = m.presence
            state = "online" if p.is_online else "offline"
            items.append(
                f'<li class="presence-roster-member presence-{state}" '
                f'data-presence-member="{escape(p.user_id)}" data-presence-state="{state}" '
                f'data-presence-order="{n}">{dot_html(p)} '
                f'<span class="presence-roster-name">{escape(display_name(m.user))}</span> '
                f"{last_seen_html(p)}</li>"
            )
        return (
            f'<ul class="presence-roster" data-presence-roster="{escape(self.room)}">'
            f"{''.join(items)}</ul>"
        )

    def __str__(self) -> str:
        return self.__html__()


@register.simple_tag(takes_context=True)
def room_roster(context: template.Context, room: str) -> list[Any]:
    """Every member of the permanent ``room``, offline ones too: ``{% room_roster r as
    members %}``, each with ``.user``, ``.presence`` and ``.last_seen`` (one query, one round
    trip; see presence_app/rooms.py). Empty for a viewer ``CAN_JOIN`` keeps out. Alone,
    ``{% room_roster r %}`` renders the live roster (:class:`Roster`)."""
    from .. import rooms

    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not presence.can_join(user, room):
        return Roster(room, [])
    members = _read([], lambda: rooms.members(room, viewer=_viewer(context)))
    # The request's own user as the other tags show them (not offline on their own page).
    viewer = _batch(context).viewer.id
    members = [
        dataclasses.replace(m, presence=_presence(context, viewer))
        if m.presence.user_id == viewer and m.presence.state == "offline"
        else m
        for m in members
    ]
    return Roster(room, members)


@register.simple_tag
def presence_sse_html_url(rooms: Any = "", users: Any = ()) -> str:
    """The URL of the HTML presence stream for htmx (:mod:`presence_app.realtime.htmx`):
    ``sse-connect="{% presence_sse_html_url rooms="lobby" users=people %}"``. ``rooms``: a name,
    names separated by commas, or a list; ``users``: users or ids."""
    from urllib.parse import urlencode

    from django.urls import reverse

    names = rooms.split(",") if isinstance(rooms, str) else [str(r) for r in rooms or ()]
    query = {
        "rooms": ",".join(n.strip() for n in names if n.strip()),
        "users": ",".join(user_keys(users if not isinstance(users, str) else users.split(","))),
    }
    found = urlencode({k: v for k, v in query.items() if v}, safe=",")
    return reverse("presence_app:sse-html") + (f"?{found}" if found else "")
