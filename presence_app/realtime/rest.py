"""REST calls of an SSE stream: join, leave, status, typing, heartbeat, activity, watch.

``POST presence/api/stream/<frame>/`` with the frame's fields as a JSON body, the CSRF token
(``X-CSRFToken``, Django's CSRF middleware checks it) and the stream's signed name
(``X-Presence-Stream``, from its ``hello``). A form body (an htmx page's ``hx-post``) is taken
too: its fields are the frame's, as text, the stream's name may come as its
``presence_stream`` field (the htmx stream's ``presence-stream`` event), and a ``roomstate``'s
other fields are its state (none: cleared). The call is not applied here: it is sent over the
channel layer to the stream it names, on whatever process holds it, and the stream applies it
exactly as a socket applies the same frame (:func:`presence_app.realtime.frames.apply`: the same
validation, ``CAN_JOIN``, limits and rate limit). Its outcome comes back to this request:

====  ==========================================================================
200   done (``{"ok": true}``); its events arrive on the stream
400   ``bad_frame``, ``too_large``, ``unknown_type``, ``invalid``
401   not signed in; 403: CSRF, a stream of somebody else's, or ``forbidden``
404   ``gone``: the stream is closed (or its process died): open a new one
409   ``limit``, ``not_joined``; 429: ``rate_limited``; 503: ``unavailable``
====  ==========================================================================

A call to a stream known to have ended is answered ``gone`` at once: one of this process
(:func:`presence_app.realtime.lifecycle.stream_ended`), or one a call already waited for in
vain. A user's calls are rate limited before they reach any stream (``MAX_FRAMES_PER_SECOND``
per process, as a stream limits its own), and at most ``MAX_WAITING`` of them wait at once.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from channels.layers import get_channel_layer
from django.http import HttpRequest, JsonResponse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from .. import conf
from ..core import rules
from ..core.limits import KeyedBuckets
from ..store import UNAVAILABLE
from . import frames, lifecycle, protocol
from .protocol import FrameError
from .sse import let_go, stream_channel

#: How long a call waits for its stream's answer (a busy process, a slow CAN_JOIN hook).
REPLY_TIMEOUT = 15.0
#: A user's calls waiting for their streams' answers at once, per process.
MAX_WAITING = 8

_calls = KeyedBuckets()  # each user's calls, per process
_waiting: dict[str, int] = {}

STATUS = {
    "bad_frame": 400,
    "too_large": 400,
    "unknown_type": 400,
    "invalid": 400,
    "forbidden": 403,
    "limit": 409,
    "not_joined": 409,
    "rate_limited": 429,
    "unavailable": 503,
}


def _error(code: str, detail: str, status: int | None = None, **extra: Any) -> JsonResponse:
    return JsonResponse(
        protocol.error_frame(code, detail, **extra), status=status or STATUS.get(code, 400)
    )


async def _ask(layer: Any, channel: str, frame: dict[str, Any]) -> dict[str, Any] | None:
    """Sends ``frame`` to the stream and waits for its answer (None: no stream answered)."""
    reply = await layer.new_channel()
    try:
        await layer.send(channel, {"type": "presence.rest", "frame": frame, "reply": reply})
    except BaseException:
        await let_go(layer, reply)
        raise
    try:
        answer = await asyncio.wait_for(layer.receive(reply), REPLY_TIMEOUT)
    except TimeoutError:
        return None  # the cancelled receive has let go of the reply channel
    await let_go(layer, reply)
    return answer


#: The form field that names the stream, where no ``X-Presence-Stream`` header does.
STREAM_FIELD = "presence_stream"


def _is_form(request: HttpRequest) -> bool:
    return request.content_type == "application/x-www-form-urlencoded"


def _frame(request: HttpRequest, frame_type: str) -> dict[str, Any]:
    """The frame a body (of at most ``MAX_FRAME_BYTES``) describes."""
    if _is_form(request):
        fields = {k: v for k, v in request.POST.items() if k != STREAM_FIELD}
        if frame_type == "roomstate":
            room = fields.pop("room", None)
            fields = {"room": room, "data": fields or None}
        return {**fields, "type": frame_type}
    try:
        fields = json.loads(request.body or b"{}", parse_constant=_not_json)
    except (ValueError, RecursionError):
        raise FrameError("bad_frame", "The body is not valid JSON.") from None
    if not isinstance(fields, dict):
        raise FrameError("bad_frame", "The body must be a JSON object.")
    return {**fields, "type": frame_type}


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _gone() -> JsonResponse:
    return _error("gone", "the stream is closed; open a new one", status=404)


def _rate_refusal(uid: str) -> JsonResponse | None:
    """A 429 when ``uid`` called too often (a token bucket per user) or has ``MAX_WAITING``
    calls waiting already; None when the call may go on."""
    limit = float(conf.get("MAX_FRAMES_PER_SECOND"))
    wait = _calls.take(uid, limit, limit)
    if not wait and _waiting.get(uid, 0) < MAX_WAITING:
        return None
    response = _error(
        "rate_limited",
        f"A user may make at most {limit:g} stream calls a second, {MAX_WAITING} at once.",
    )
    response["Retry-After"] = str(max(1, int(-(-wait // 1))))
    return response


@never_cache
@require_POST
async def command(request: HttpRequest, frame_type: str) -> JsonResponse:
    """Applies one frame to the caller's own SSE stream; see the module's table."""
    user = await request.auser()
    if not user.is_authenticated:
        return JsonResponse({"detail": _("Authentication required.")}, status=401)
    if frame_type not in frames.HANDLERS:
        return _error("unknown_type", "unknown frame type")
    uid = rules.user_id(user)
    limit = int(conf.get("MAX_FRAME_BYTES"))
    if len(request.body) > limit:  # before a form's fields are read
        return _error("too_large", f"A frame may be at most {limit} bytes.")
    name = request.headers.get("X-Presence-Stream", "")
    if not name and _is_form(request):
        name = request.POST.get(STREAM_FIELD, "")
    channel = stream_channel(name, uid)
    if channel is None:
        return _error("forbidden", "X-Presence-Stream does not name a stream of yours")
    refusal = _rate_refusal(uid)
    if refusal is not None:
        return refusal
    try:
        frame = _frame(request, frame_type)
    except FrameError as exc:
        return _error(exc.code, exc.detail)
    if lifecycle.stream_ended(channel):
        return _gone()
    layer = get_channel_layer()
    _waiting[uid] = _waiting.get(uid, 0) + 1
    try:
        answer = await _ask(layer, channel, frame)
    except UNAVAILABLE:
        return _error("unavailable", "presence is temporarily unavailable; try again")
    finally:
        _waiting[uid] -= 1
        if not _waiting[uid]:
            del _waiting[uid]
    if answer is None:
        lifecycle.ended(channel)  # the next calls to it are answered at once
        return _gone()
    error = answer.get("error")
    if error:
        return JsonResponse(error, status=STATUS.get(error.get("code"), 400))
    return JsonResponse({"ok": True})
