"""A small JSON API over the store: users' presence, the online list, a room's members.

Signed-in users only (401 otherwise). Each answer is one or two Redis round trips whatever its
size; invisible users read as offline to everybody but themselves. Redis away: 503.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from functools import partial, wraps
from typing import Any
from urllib.parse import unquote_to_bytes

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, JsonResponse
from django.utils.crypto import constant_time_compare, salted_hmac
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods

from .. import conf, presence, rooms
from ..core import dispatch, rules, tenants
from ..failopen import breaker
from ..markup import display_name
from ..store import UNAVAILABLE, InvalidInput, Presence
from .ratelimit import bounded_ids, rate_limited

MAX_PER_PAGE = 100
#: The deepest offset ``?page=`` reaches (a page there reads that many entries and its own);
#: past it a list is read on with ``?cursor=`` (a position: a page costs its own size).
MAX_PAGE_OFFSET = 10_000
#: The largest ``?page=`` number the API parses (those past ``MAX_PAGE_OFFSET`` are refused).
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
    presences = presence.get_many(_ids(request), viewer=request.user, activity=True)
    return {"users": [p.as_dict() for p in presences.values()]}


def _ids(request: HttpRequest) -> list[str]:
    """The ids of ``?ids=1,2,3`` (or ``?id=1&id=2``): at least one, at most
    ``MAX_WATCHED_USERS``."""
    ids = [i.strip() for raw in request.GET.getlist("ids") for i in raw.split(",") if i.strip()]
    ids += [i for i in request.GET.getlist("id") if i]
    if not ids:
        raise BadRequest(_("Pass the user ids as ?ids=1,2,3."))
    if len(ids) > conf.get("MAX_WATCHED_USERS"):
        limit = conf.get("MAX_WATCHED_USERS")
        raise BadRequest(_("A request may name at most %(max)s ids.") % {"max": limit})
    return ids


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


#: What a cursor is sealed with (``salted_hmac``: the ``SECRET_KEY``), and the longest taken.
CURSOR_SALT = "presence_app.web.api.online.cursor"
MAX_CURSOR_LENGTH = 600
_TAG = 16  # bytes of the cursor's tag (and of its keystream's nonce)


def _keystream(tag: bytes, size: int) -> bytes:
    blocks = (
        salted_hmac(f"{CURSOR_SALT}.key", tag + n.to_bytes(4, "big"), algorithm="sha256").digest()
        for n in range(-(-size // 32))
    )
    return b"".join(blocks)[:size]


def _tag(scope: str, plain: bytes) -> bytes:
    value = scope.encode() + b"\0" + plain
    return salted_hmac(f"{CURSOR_SALT}.tag", value, algorithm="sha256").digest()[:_TAG]


def encode_cursor(position: presence.Position, scope: str) -> str:
    """A position in the online list as an opaque token for ``scope`` (the workspace and the
    viewer): sealed (SIV: the tag is a MAC of the scope and the position, and the nonce of the
    keystream that hides it), so a client can neither read the score and id of the entry it
    stands at (a user the viewer may not see, when a policy scan ended on one) nor forge one. The
    same position gives the same token."""
    score, uid = position
    plain = json.dumps([float(score), uid], separators=(",", ":"), ensure_ascii=False).encode()
    tag = _tag(scope, plain)
    sealed = bytes(a ^ b for a, b in zip(plain, _keystream(tag, len(plain)), strict=True))
    return base64.urlsafe_b64encode(tag + sealed).rstrip(b"=").decode()


def decode_cursor(token: str, scope: str) -> presence.Position:
    """The position a token of :func:`encode_cursor` holds for ``scope``; BadRequest (400) for
    anything else: a number, a token of another viewer or workspace, one altered."""
    refused = BadRequest(
        _("This cursor is not one the online list gave you: start again without ?cursor=.")
    )
    if not token or len(token) > MAX_CURSOR_LENGTH or not token.isascii():
        raise refused
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
    except (ValueError, binascii.Error):
        raise refused from None
    tag, sealed = raw[:_TAG], raw[_TAG:]
    plain = bytes(a ^ b for a, b in zip(sealed, _keystream(tag, len(sealed)), strict=True))
    if not sealed or not constant_time_compare(tag, _tag(scope, plain)):
        raise refused
    score, uid = json.loads(plain)
    return float(score), str(uid)


def _cursor_scope(viewer: Any) -> str:
    """Whose cursors a request reads: the workspace's and the viewer's only."""
    return f"{tenants.current() or ''}\0{viewer.id or ''}"


@rate_limited
@api_view
def online(request: HttpRequest) -> dict[str, Any]:
    """``?per_page=50`` and ``?page=1`` (the first ``MAX_PAGE_OFFSET`` users) or ``?cursor=``
    (the previous page's ``next``, an opaque token: a position in the list, not an offset, so
    the page after it costs its own size and users coming online do not move it): online
    users, most recently seen first, with their presence. Under an ``AUDIENCE`` policy a page
    reads on from its cursor at most ``AUDIENCE_SCAN_LIMIT`` entries (a page cut short has a
    ``next``), and ``count`` covers the ``AUDIENCE_SCAN_LIMIT`` most recently seen."""
    per_page = _int(request, "per_page", 50, 1, MAX_PER_PAGE)
    reads = presence.Reads()
    viewer = presence.viewer(request.user)
    scope = _cursor_scope(viewer)
    if "cursor" in request.GET:
        page, offset, cursor = None, 0, decode_cursor(request.GET["cursor"], scope)
    else:
        (page, offset), cursor = _page(request, per_page), None
    (ids, after), total = presence.batch(
        reads.online_page(per_page, cursor, viewer=viewer, offset=offset),
        reads.online_count(viewer=viewer),
    )
    presences = presence.get_many(ids, viewer=viewer, activity=True) if ids else {}
    return {
        "count": total,
        "page": page,
        "num_pages": max(1, -(-total // per_page)),
        "next": None if after is None else encode_cursor(after, scope),
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
    """The visible members of ``room``, in the order they came, with their presence: a page at
    a time (``?offset=0&limit=100``; ``next``, the offset of the next page, null after the
    last), of at most ``limit`` members and about ``ROOM_SNAPSHOT_BYTES`` of them; ``count``
    is all of them. Only the page's presences are read. A count-only room
    (``COUNT_ONLY_ROOMS``): its count alone, as its members get it."""
    if not _raw_path_is_utf8(request):
        raise InvalidInput(rules.NOT_UTF8_ROOM)
    if not can_view_room(request.user, room):
        raise PermissionDenied(room)
    offset = _int(request, "offset", 0, 0, MAX_CURSOR)
    limit = _int(request, "limit", MAX_PER_PAGE, 1, MAX_PER_PAGE)
    if dispatch.count_only(rules.room(room)):
        count = presence.room_count(room)  # as a signed-out visitor counts, for everyone
        return {"room": room, "count": count, "members": [], "offset": 0, "next": None}
    viewer = presence.viewer(request.user)
    ids = presence.room_members(room, viewer=viewer)
    page = ids[offset : offset + limit]
    presences = presence.get_many(page, viewer=viewer, activity=True) if page else {}
    members, size, bound = [], 0, max(1, int(conf.get("ROOM_SNAPSHOT_BYTES")))
    for member in _with_names(presences):
        cost = len(json.dumps(member)) + 2
        if members and size + cost > bound:
            break
        members.append(member)
        size += cost
    end = offset + len(members)
    return {
        "room": room,
        "count": len(ids),
        "members": members,
        "offset": offset,
        "next": end if end < len(ids) else None,
    }


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


@rate_limited
@bounded_ids
@api_view
def room_names(request: HttpRequest, room: str) -> dict[str, Any]:
    """``?ids=7,9``: the names (``markup.display_name``, as the dashboard shows them) of those
    of the ids who are in ``room`` as the viewer sees it, ``{"room": R, "names": {"7": "Ann
    Lee"}}``: what a live ``{% room_members %}`` list shows of a member who joins after the
    page was rendered. Nobody the viewer may not see in the room is named (an invisible member,
    one outside the viewer's ``AUDIENCE``, one who left, anybody in a count-only room): the
    asked ids among the room's members as the viewer's list shows them; one round trip (a
    lookup an id, whatever the room's size) and one query."""
    if not _raw_path_is_utf8(request):
        raise InvalidInput(rules.NOT_UTF8_ROOM)
    if not can_view_room(request.user, room):
        raise PermissionDenied(room)
    here = presence.room_members(
        rules.room(room), viewer=presence.viewer(request.user), among=_ids(request)
    )
    users = rules.users_in_order(here) if here else []
    return {"room": room, "names": {rules.user_id(u): display_name(u) for u in users}}
