"""A small JSON API over the store: users' presence, the online list, a room's members.

Signed-in users only (401 otherwise). Each answer is one or two Redis round trips whatever its
size; invisible users read as offline to everybody but themselves. Redis away: 503.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial, wraps
from typing import Any
from urllib.parse import unquote_to_bytes

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, JsonResponse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods

from .. import conf, presence, rooms
from ..core import rules
from ..failopen import breaker
from ..store import UNAVAILABLE, InvalidInput, Presence
from .ratelimit import bounded_ids, rate_limited

MAX_PER_PAGE = 100
#: The deepest offset ``?page=`` reaches; past it a list is read on with ``?cursor=``.
MAX_PAGE_OFFSET = 10_000
#: The largest cursor the API takes (beyond any online list on one Redis).
MAX_CURSOR = 10**9


class BadRequest(Exception):
    """A query parameter the API refuses; answered with 400 and the message."""


def api_view(
    view: Callable[..., dict[str, Any]], methods: tuple[str, ...] = ("GET",)
) -> Callable[..., JsonResponse]:
    """Login required, GET only (unless the view says), never cached; the view returns a dict,
    errors become JSON."""

    @never_cache
    @require_http_methods(list(methods))
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
        if not request.user.is_authenticated:
            return JsonResponse({"detail": _("Authentication required.")}, status=401)
        if breaker.is_open:
            return _unavailable()
        try:
            return JsonResponse(view(request, *args, **kwargs))
        except (BadRequest, InvalidInput) as exc:
            return JsonResponse({"detail": str(exc)}, status=400)
        except PermissionDenied:
            return JsonResponse({"detail": _("You cannot see this room.")}, status=403)
        except UNAVAILABLE as exc:
            breaker.trip(exc, "the JSON API")
            return _unavailable()

    return wrapper


def _unavailable() -> JsonResponse:
    """503 while Redis is away. The breaker logs the outage once per TOUCH_INTERVAL; Django
    would add an ERROR line for every 503 it serves (django.request), and pages poll this API:
    an outage would flood the log. So this answer counts as logged."""
    response = JsonResponse({"detail": _("Presence is unavailable.")}, status=503)
    response._has_been_logged = True  # django.utils.log.log_response skips it
    return response


def _int(request: HttpRequest, name: str, default: int, low: int, high: int) -> int:
    """``?name=``, a whole number from ``low`` to ``high`` (400 otherwise: never clipped)."""
    raw = request.GET.get(name, default)
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise BadRequest(
            _("%(name)s must be a whole number from %(low)s to %(high)s.")
            % {"name": name, "low": low, "high": high}
        )
    return value


def _page(request: HttpRequest, per_page: int) -> tuple[int, int]:
    """``(page, offset)`` of ``?page=``, refused past ``MAX_PAGE_OFFSET``."""
    page = _int(request, "page", 1, 1, MAX_CURSOR)
    if (page - 1) * per_page > MAX_PAGE_OFFSET:
        raise BadRequest(
            _("Pages past the first %(max)s users are read with the cursor (?cursor=).")
            % {"max": MAX_PAGE_OFFSET}
        )
    return page, (page - 1) * per_page


def _with_names(presences: dict[str, Presence]) -> list[dict[str, Any]]:
    users = {rules.user_id(u): u for u in rules.users_in_order(presences)}
    return [
        {**p.as_dict(), "username": users[uid].get_username() if uid in users else None}
        for uid, p in presences.items()
    ]


@rate_limited
@bounded_ids
@api_view
def users(request: HttpRequest) -> dict[str, Any]:
    """``?ids=1,2,3`` (or ``?id=1&id=2``): each user's presence in the order asked; one round
    trip."""
    ids = [i.strip() for raw in request.GET.getlist("ids") for i in raw.split(",") if i.strip()]
    ids += [i for i in request.GET.getlist("id") if i]
    if not ids:
        raise BadRequest(_("Pass the user ids as ?ids=1,2,3."))
    if len(ids) > conf.get("MAX_WATCHED_USERS"):
        limit = conf.get("MAX_WATCHED_USERS")
        raise BadRequest(_("A request may name at most %(max)s ids.") % {"max": limit})
    presences = presence.get_many(ids, viewer=request.user, activity=True)
    return {"users": [p.as_dict() for p in presences.values()]}


@rate_limited
@csrf_protect
@partial(api_view, methods=("GET", "POST"))
def privacy(request: HttpRequest) -> dict[str, Any]:
    """The signed-in user's choice of who sees their last seen: ``GET`` reads it, ``POST``
    (JSON ``{"last_seen": "everyone" | "audience" | "nobody", "approximate": bool}``, either
    or both) changes it."""
    if request.method == "POST":
        try:
            body = json.loads(request.body or b"{}")
        except (ValueError, RecursionError):  # nested deeper than Python's recursion limit
            raise BadRequest(_("The body is not valid JSON.")) from None
        if not isinstance(body, dict):
            raise BadRequest(_("The body must be a JSON object."))
        choice = presence.set_privacy(request.user, body.get("last_seen"), body.get("approximate"))
    else:
        choice = presence.get_privacy(request.user)
    return {"last_seen": choice.visible_to, "approximate": choice.approximate}


@rate_limited
@api_view
def online(request: HttpRequest) -> dict[str, Any]:
    """``?per_page=50`` and ``?page=1`` (the first ``MAX_PAGE_OFFSET`` users) or ``?cursor=``
    (the previous page's ``next``): online users, most recently seen first, with their
    presence. Under an ``AUDIENCE`` policy ``count`` covers the ``AUDIENCE_SCAN_LIMIT`` most
    recently seen."""
    per_page = _int(request, "per_page", 50, 1, MAX_PER_PAGE)
    reads = presence.Reads()
    viewer = presence.viewer(request.user)
    if "cursor" in request.GET:
        page, cursor = None, _int(request, "cursor", 0, 0, MAX_CURSOR)
        (ids, after), total = presence.batch(
            reads.online_page(per_page, cursor, viewer=viewer), reads.online_count(viewer=viewer)
        )
    else:
        page, offset = _page(request, per_page)
        ids, total = presence.batch(
            reads.online(offset=offset, limit=per_page + 1, viewer=viewer),
            reads.online_count(viewer=viewer),
        )
        after = offset + per_page if len(ids) > per_page and not viewer.filtered else None
        ids = ids[:per_page]
    presences = presence.get_many(ids, viewer=viewer, activity=True) if ids else {}
    return {
        "count": total,
        "page": page,
        "num_pages": max(1, -(-total // per_page)),
        "next": after,
        "results": _with_names(presences),
    }


def can_view_room(user: Any, room: str) -> bool:
    """Whoever may join a room may see it: ``CAN_JOIN`` decides (sync or async)."""
    try:
        return presence.can_join(user, rules.room(room))
    except UNAVAILABLE as exc:
        # The site's own hook failed (its database, its HTTP service): a 500 with its
        # traceback, not presence's 503 and a tripped breaker.
        raise RuntimeError(f"CAN_JOIN failed for room {room!r}") from exc


def _raw_path_is_utf8(request: HttpRequest) -> bool:
    """Django re-percent-encodes bytes that are not UTF-8 ("%FF" stays "%FF"): the raw path
    tells a broken name from one that really holds "%FF". Under WSGI Django has already decoded
    the path (any character, "€" included: it is text, not Latin-1 bytes), so it is read back as
    UTF-8, and the bytes it re-percent-encoded come out broken again."""
    scope = getattr(request, "scope", None)
    raw = scope.get("raw_path") if scope else None
    if raw is None:
        raw = request.path_info.encode("utf-8", "surrogatepass")
    try:
        unquote_to_bytes(raw).decode()
    except UnicodeDecodeError:
        return False
    return True


@rate_limited
@api_view
def room(request: HttpRequest, room: str) -> dict[str, Any]:
    """The visible members of ``room``, in the order they came, with their presence."""
    if not _raw_path_is_utf8(request):
        raise InvalidInput(rules.NOT_UTF8_ROOM)
    if not can_view_room(request.user, room):
        raise PermissionDenied(room)
    viewer = presence.viewer(request.user)
    ids = presence.room_members(room, viewer=viewer)
    presences = presence.get_many(ids, viewer=viewer, activity=True) if ids else {}
    return {"room": room, "count": len(ids), "members": _with_names(presences)}


@rate_limited
@api_view
def room_roster(request: HttpRequest, room: str) -> dict[str, Any]:
    """The members of the permanent ``room`` (presence_app/rooms.py), offline ones with their
    last seen, a page at a time (``?page=1&per_page=50``): one query and one round trip."""
    if not _raw_path_is_utf8(request):
        raise InvalidInput(rules.NOT_UTF8_ROOM)
    if not can_view_room(request.user, room):
        raise PermissionDenied(room)
    per_page = _int(request, "per_page", 50, 1, MAX_PER_PAGE)
    total = rooms.member_count(room)
    page = _int(request, "page", 1, 1, max(1, -(-total // per_page)))
    members = rooms.members(room, viewer=request.user, offset=(page - 1) * per_page, limit=per_page)
    return {
        "room": room,
        "count": total,
        "page": page,
        "num_pages": max(1, -(-total // per_page)),
        "members": [m.as_dict() for m in members],
    }
