"""Presence over Server-Sent Events: one ``EventSource`` stream a tab, changes sent by REST.

``GET presence/sse/`` (an async view: uvicorn, daphne) carries a
:class:`~presence_app.realtime.session.PresenceSession` exactly as a WebSocket does: the same ``hello``
first, then the same frames as ``data:`` lines (a room's snapshot, then its diffs). The stream
has a channel of its own on the channel layer (``layer.new_channel()``); its loop relays the
layer's events to the browser and applies the REST calls (:mod:`presence_app.realtime.rest`) that other
requests, on any process, send to that channel.

- Liveness: a comment line every ``HEARTBEAT_INTERVAL`` (at most half the grace) keeps proxies
  from closing an idle stream and renews the lease; a stream that ends has its lease cut to the
  grace.
- Resuming: events that change the stream's rooms carry an ``id:`` naming (signed) the
  connection and its rooms. The browser's reconnect sends it back as ``Last-Event-ID``; the new
  stream takes over the same lease and rooms, so a reconnect within the grace announces nothing.
- The ``hello`` frame holds ``stream``: the signed name of this stream, which REST calls give in
  ``X-Presence-Stream``; a user can drive only their own streams.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

from channels.layers import get_channel_layer
from django.core import signing
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.middleware.csrf import get_token
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from .. import conf, rooms
from ..core import dispatch, rules, tenants
from ..failopen import log_outage
from ..store import UNAVAILABLE
from . import frames, lifecycle, protocol
from .session import PresenceSession
from .subscriptions import let_go

logger = logging.getLogger("presence_app")

STREAM_SALT = "presence_app.sse.stream"
RESUME_SALT = "presence_app.sse.resume"
#: A resume id older than this is ignored (a fresh stream starts instead).
RESUME_MAX_AGE = 24 * 3600
#: Frames waiting for a browser that stopped reading: past this the stream ends (the browser
#: reconnects and resumes) rather than queue without bound.
MAX_QUEUED = 1000
#: How long the browser waits before reconnecting, in ms (the SSE ``retry:`` field).
RETRY_MS = 2000


# -- signed names -------------------------------------------------------------------------------
def stream_token(user_id: str, channel: str) -> str:
    """The signed name of a stream, valid for its user only."""
    return signing.dumps([user_id, channel], salt=STREAM_SALT)


def stream_channel(token: str, user_id: str) -> str | None:
    """The channel of the stream ``token`` names, if it is ``user_id``'s; else None."""
    try:
        owner, channel = signing.loads(token, salt=STREAM_SALT)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    return channel if owner == user_id and isinstance(channel, str) else None


def resume_id(session: PresenceSession) -> str:
    """The ``id:`` of an event: who, which connection, which rooms (signed)."""
    return signing.dumps(
        [session.user_id, session.conn_id, sorted(session.rooms)], salt=RESUME_SALT, compress=True
    )


def read_resume_id(token: str, user_id: str) -> tuple[str, list[str]] | None:
    """``(conn_id, rooms)`` of a ``Last-Event-ID`` of ``user_id``'s; None if it is not one."""
    try:
        owner, conn_id, names = signing.loads(token, salt=RESUME_SALT, max_age=RESUME_MAX_AGE)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    if owner != user_id or not isinstance(conn_id, str) or not isinstance(names, list):
        return None
    return conn_id, [r for r in names if isinstance(r, str)]


def beat_interval(settings: dict[str, Any]) -> float:
    """How often a stream writes its keep-alive and renews its lease: every heartbeat interval,
    and within half the grace. A resumed stream shares its lease with the stream it replaced,
    and that one's close (which a server may notice late) cuts the lease to the grace: the
    next beat must come before the grace ends."""
    interval, grace = float(settings["HEARTBEAT_INTERVAL"]), float(settings["DISCONNECT_GRACE"])
    return min(interval, grace / 2) if grace > 0 else interval


def event_bytes(frame: dict[str, Any], event_id: str | None = None) -> bytes:
    """One SSE event: an optional ``id:`` and the frame as one ``data:`` line (JSON has no
    raw newlines)."""
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}data: {json.dumps(frame)}\n\n".encode()


# -- the stream -------------------------------------------------------------------------------
class EventStream:
    """One SSE stream: its session, its channel, the frames waiting for the browser."""

    sign_in: str | None = None  # the sign-in (session) it was opened with, as dispatch tags it

    def __init__(
        self, user: Any, layer: Any, channel: str, device: str | None, csrf: str | None = None
    ) -> None:
        self.csrf = csrf
        self.layer = layer
        self.channel = channel
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.session = PresenceSession(
            user, layer=layer, channel_name=channel, send=self.push, device=device
        )
        self.frame_rate = protocol.FrameRate()
        self.rooms_sent: list[str] | None = None
        self.ending = False  # end() was called: the server is shutting down
        self.receiving = False  # the relay waits in the layer's receive (not in a handler)

    def end(self) -> None:
        """Ends the stream after the frames already queued (the server is shutting down)."""
        self.ending = True
        self.queue.put_nowait(None)

    async def push(self, frame: dict[str, Any]) -> None:
        """The session's ``send``: queued for the browser (never blocks the channel loop)."""
        if self.queue.qsize() >= MAX_QUEUED:
            self.queue.put_nowait(None)  # the end: see events()
            return
        self.queue.put_nowait(frame)

    async def start(self, resume: tuple[str, list[str]] | None) -> None:
        """Takes the lease (the old one when resuming), sends ``hello``, re-enters the rooms."""
        if resume is not None:
            self.session.conn_id = resume[0]
        hello = await self.session.open()
        hello["stream"] = stream_token(self.session.user_id, self.channel)
        hello["transport"] = "sse"
        hello["csrf"] = self.csrf  # for the REST calls' X-CSRFToken (the cookie may be HttpOnly)
        hello["resumed"] = resume is not None
        await self.push(hello)
        wanted = resume[1] if resume is not None else []
        for room in wanted:
            # CAN_JOIN is asked again for every room a resume names, as on a first join.
            error = await frames.apply(self.session, {"type": "join", "room": room})
            if error is not None:
                await self.push(error)
        # The resumed lease still holds, in Redis, the rooms it was in: those refused now
        # are left, with a leave to their members.
        await self.session.drop_stale(wanted)
        with tenants.activate(self.session.tenant):  # the memberships of its workspace
            permanent = await rooms.apermanent_rooms_to_join(self.session.user, wanted)
        for room in permanent:
            error = await frames.join_unasked(self.session, room)  # owed through an outage
            if error is not None:
                await self.push(error)

    async def relay(self) -> None:
        """The channel's loop: layer events to the browser, REST calls to the session."""
        while True:
            self.receiving = True
            message = await self.layer.receive(self.channel)
            self.receiving = False
            try:
                if message.get("type") == "presence.rest":
                    await self.apply_rest(message)
                elif message.get("type") == "presence.message":
                    await self.push(message)  # send_to_user: the user's own, no audience applies
                elif message.get("type") in frames.OWN_EVENTS:
                    await frames.on_own_event(self.session, message)
                elif message.get("type") == "presence.signed_out":
                    if self.sign_in is not None and message.get("session") == self.sign_in:
                        await self.session.close()  # its sign-in ended: the browser asks again
                        self.queue.put_nowait(None)
                elif message.get("type") == "presence.forgotten":
                    await self.session.close(forgotten=True)  # the user was erased
                    self.queue.put_nowait(None)  # the end of the stream
                elif str(message.get("type", "")).startswith("presence."):
                    await self.session.event(message)
            except Exception:
                logger.exception("presence: an SSE stream failed to handle %r", message.get("type"))

    async def apply_rest(self, message: dict[str, Any]) -> None:
        """A REST call of this stream's user: rate limited and applied like a socket frame;
        the outcome goes back to the waiting request."""
        frame = message.get("frame")
        if not isinstance(frame, dict):
            return
        error = self.frame_rate.refusal(frame=frame.get("type"))
        if error is None:
            error = await frames.apply(self.session, frame)
        reply = message.get("reply")
        if isinstance(reply, str):
            await self.layer.send(reply, {"type": "presence.rest.reply", "error": error})

    async def events(self, resume: tuple[str, list[str]] | None) -> AsyncIterator[bytes]:
        """The response body. Cancelled by Django when the browser goes; the lease then gets
        its grace."""
        relay: asyncio.Future[None] | None = None
        loop = asyncio.get_running_loop()
        interval = beat_interval(conf.get_settings())
        beat_at = loop.time() + interval
        try:
            yield f"retry: {RETRY_MS}\n\n".encode()
            lifecycle.leave_request_thread()  # memory: docs/benchmarks.md, row 11
            lifecycle.track(self)  # ended at once when the server is told to stop
            await self.start(resume)
            # Only now: the hello goes first (the layer keeps what arrives meanwhile).
            relay = asyncio.ensure_future(self.relay())
            while not relay.done():
                try:
                    frame = await self.next_frame(max(0, beat_at - loop.time()))
                except TimeoutError:
                    # On the clock, busy or not: the stream being written is the lease's proof.
                    beat_at = loop.time() + interval
                    try:
                        await self.session.heartbeat()
                    except UNAVAILABLE as exc:
                        log_outage(exc)  # the coalescer retries; the lease outlives a beat
                    yield b": keep-alive\n\n"
                    continue
                if frame is None:
                    if not self.ending and not self.session.closed:
                        logger.info("presence: an SSE stream fell %s frames behind", MAX_QUEUED)
                    return
                yield await self.encode(frame)
        finally:
            if relay is not None:
                relay.cancel()
                with suppress(asyncio.CancelledError):
                    await relay
            if relay is None or not self.receiving:
                # Cancelled in a handler, not in its receive: nothing let the channel go.
                await let_go(self.layer, self.channel)
            await asyncio.shield(self.session.close())

    async def next_frame(self, timeout: float) -> dict[str, Any] | None:
        """The next queued frame (TimeoutError after ``timeout``). Not ``asyncio.wait_for``: on
        Python 3.11 it loses a cancellation that comes as the frame arrives, and the stream of a
        browser that left would run on, renewing its lease (tests/reliability/test_soak_findings.py)."""
        getter = asyncio.ensure_future(self.queue.get())
        try:
            done, _ = await asyncio.wait({getter}, timeout=timeout)
        finally:
            getter.cancel()  # a no-op once it is done
        if not done:
            raise TimeoutError
        return getter.result()

    async def encode(self, frame: dict[str, Any]) -> bytes:
        """A frame as the stream's bytes: here one JSON event (presence_app.realtime.htmx renders HTML)."""
        return event_bytes(frame, self.next_id())

    def next_id(self) -> str | None:
        """A new ``id:`` when the rooms changed since the last one (the browser keeps the last
        id it saw, so the others need none)."""
        current = sorted(self.session.rooms)
        if current == self.rooms_sent:
            return None
        self.rooms_sent = current
        return resume_id(self.session)


def device_of(request: HttpRequest) -> str | None:
    """The ``?device=`` the client named, reduced to safe characters (as on the socket)."""
    return rules.device(request.GET.get("device"))


async def serve(request: HttpRequest, make: Any) -> HttpResponse:
    """A stream's response for the signed-in user (401 otherwise, 503 without a channel layer):
    ``make(user, layer, channel)`` builds its :class:`EventStream`; a ``Last-Event-ID`` of
    theirs resumes it."""
    user = await request.auser()
    if not user.is_authenticated:
        return JsonResponse({"detail": _("Authentication required.")}, status=401)
    layer = get_channel_layer()
    if layer is None:
        return JsonResponse({"detail": _("Presence is unavailable.")}, status=503)
    es = make(user, layer, await layer.new_channel())
    es.sign_in = dispatch.session_tag(
        getattr(getattr(request, "session", None), "session_key", None)
    )
    last = request.headers.get("Last-Event-ID") or request.GET.get("lastEventId")
    resume = read_resume_id(last, es.session.user_id) if last else None
    response = StreamingHttpResponse(es.events(resume), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: do not buffer the stream
    return response


@never_cache
@require_GET
async def stream(request: HttpRequest) -> HttpResponse:
    """``GET presence/sse/``: the presence stream of the signed-in user (401 otherwise)."""
    return await serve(
        request,
        lambda user, layer, channel: EventStream(
            user, layer, channel, device_of(request), get_token(request)
        ),
    )
