"""Presence on a WebSocket: the mixin a project's own consumer uses, and ``PresenceConsumer``.

:class:`PresenceConsumerMixin` lets a project's ``AsyncWebsocketConsumer`` or
``AsyncJsonWebsocketConsumer`` carry presence on its own socket (one socket a tab, not two)::

    class ChatConsumer(PresenceConsumerMixin, AsyncJsonWebsocketConsumer):
        async def connect(self):
            await self.accept()
            if await self.presence_connect():  # False: anonymous, closed with 4401
                ...  # the chat's own set-up

        async def disconnect(self, code):
            await self.presence_disconnect()

        async def receive_json(self, content, **kwargs):
            if await self.presence_receive(content):  # heartbeat, join, status, ...
                return
            ...  # the chat's own frames

The socket then holds a lease renewed by heartbeats (through the process' coalescer), joins
rooms, watches users, keeps its grace on close and receives ``presence.*`` events, exactly as
:class:`PresenceConsumer` (``ws/presence/``), which is the mixin and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, urlparse

from channels.consumer import AsyncConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer
from channels.security.websocket import (
    AllowedHostsOriginValidator,
    OriginValidator,
    WebsocketDenier,
)
from channels.sessions import InstanceSessionWrapper

from . import conf
from .core import dispatch, rules, tenants
from .core.tasks import spawn
from .realtime import frames, protocol, subscriptions
from .realtime.inbox import Inbox
from .realtime.protocol import FrameError
from .realtime.resilience import OutageTolerantConsumer
from .realtime.session import PresenceSession
from .realtime.signin import SignIn
from .rooms import apermanent_rooms_to_join

CLOSE_UNAUTHENTICATED = 4401
#: The socket sent no heartbeat for LEASE_TTL (presence.js reconnects).
CLOSE_SILENT = 4408
#: The user holds MAX_CONNECTIONS_PER_USER connections already (presence.js backs off).
CLOSE_TOO_MANY_CONNECTIONS = 4429
#: The sign-in the socket was opened with signed out (presence.js connects again at once, with
#: the browser's cookies as they are now).
CLOSE_SIGNED_OUT = 4402

try:  # daphne (autobahn) raises its own error for a send to a socket that just closed
    from autobahn.exception import Disconnected as _DaphneDisconnected
except ImportError:  # pragma: no cover - no daphne installed
    _DaphneDisconnected = OSError
#: A send that found the browser gone.
CLIENT_GONE: tuple[type[BaseException], ...] = (OSError, _DaphneDisconnected)


def origin_allowed(scope: dict[str, Any]) -> bool:
    """Does the socket's ``Origin`` header name an origin ``WEBSOCKET_ORIGINS`` admits (by
    default the hosts of ``ALLOWED_HOSTS``)? Channels' own validator decides, so the rule is
    exactly AllowedHostsOriginValidator's: no header, no socket (unless ``["*"]``)."""
    origins = conf.get("WEBSOCKET_ORIGINS")
    validator = (
        AllowedHostsOriginValidator(None)
        if origins is None
        else OriginValidator(None, list(origins))
    )
    parsed = None
    for name, value in scope.get("headers", ()):
        if name == b"origin":
            parsed = urlparse(value.decode("latin-1"))
    return validator.valid_origin(parsed)


def websocket_send(consumer: Any) -> Callable[[dict[str, Any]], Awaitable[None]] | None:
    """Where ``consumer.send(text_data=...)`` ends: the server's own ``send``, under Channels'
    session middleware when the consumer's ``send`` is Channels' own. That middleware's ``send``
    acts on ``http.response.start`` only, but reads the session's ``modified`` and
    ``is_empty()`` for every message, a tenth of a server's CPU in a busy room (benchmark 17's
    profile). None when the consumer has a ``send`` of its own (an override anywhere in its
    class): it is kept."""
    owners = {AsyncWebsocketConsumer.send, AsyncConsumer.send}
    if any(
        k.__dict__.get("send", AsyncConsumer.send) not in owners for k in type(consumer).__mro__
    ):
        return None
    send = consumer.base_send
    while getattr(send, "__func__", None) is InstanceSessionWrapper.send:
        inner = getattr(send.__self__, "real_send", None)  # type: ignore[attr-defined]
        if inner is None:  # a Channels that keeps it elsewhere: through the middleware, then
            break
        send = inner
    return send  # type: ignore[no-any-return]


def device_of(scope: dict[str, Any]) -> str | None:
    """The ``?device=`` the client named (phone, desktop ...), reduced to safe characters."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("device")
    return rules.device(values[0] if values else None)


class PresenceConsumerMixin:
    """Presence for a Channels consumer; see the module's docstring for the three calls."""

    presence: PresenceSession | None = None
    presence_sign_in: str | None = None  # the session the socket was opened with (its tag)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        # The origin is checked here, whatever the project's stack: a cross-site page must not
        # open a socket with its visitor's cookies (refused at the handshake, as Channels'
        # validator does, before any channel is taken).
        if scope.get("type") == "websocket" and not origin_allowed(scope):
            await WebsocketDenier()(scope, receive, send)
            return
        # Read while a frame is handled: the server's pings are answered through a slow join.
        inbox = Inbox(receive) if scope.get("type") == "websocket" else None
        try:
            await super().__call__(scope, inbox or receive, send)  # type: ignore[misc]
        finally:
            if inbox is not None:
                inbox.close()
            await subscriptions.release(self)  # the channel, even if an event ended its receive

    async def presence_connect(self, rooms: Iterable[str] = ()) -> bool:
        """Starts presence on an accepted socket and sends the ``hello`` frame. An anonymous
        user's socket is closed with 4401 (reconnecting will not help) and False returned; one
        past ``MAX_CONNECTIONS_PER_USER`` gets an ``error`` frame (``too_many_connections``),
        is closed with 4429 and False returned.

        ``rooms``: rooms the socket is in from the start, without the browser asking (a chat
        consumer's room from its URL route), each asked of ``CAN_JOIN`` as a join frame is and
        answered the same way (the room's snapshot, or an error frame); one an outage refused
        is joined when Redis answers again, as a permanent room is."""
        user = self.scope.get("user")  # type: ignore[attr-defined]
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)  # type: ignore[attr-defined]
            return False
        self.presence_frames = protocol.FrameRate()
        # The sign-in this socket speaks for: it ends when that session signs out, and is
        # checked again every SESSION_CHECK_INTERVAL (a password change, a deleted session).
        session = self.scope.get("session")  # type: ignore[attr-defined]
        self.presence_sign_in = dispatch.session_tag(getattr(session, "session_key", None))
        self._presence_sign_in = SignIn(self.scope)  # type: ignore[attr-defined]
        self.presence = PresenceSession(
            user,
            layer=self.channel_layer,
            channel_name=self.channel_name,  # type: ignore[attr-defined]
            send=self.presence_send,
            device=device_of(self.scope),  # type: ignore[attr-defined]
            tenant=await tenants.aresolve(self.scope),  # type: ignore[attr-defined]
            end=self._presence_silent,
            # frames a room's feed encoded once for all its sockets go out as they are, unless
            # the project wraps its frames (presence_send overridden)
            send_text=self.presence_send_text
            if type(self).presence_send is PresenceConsumerMixin.presence_send
            else None,
        )
        try:
            hello = await self.presence.open()
        except protocol.ConnectionLimit as exc:
            await self.presence_send(protocol.error_frame(exc.code, exc.detail))
            await self.close(code=CLOSE_TOO_MANY_CONNECTIONS)  # type: ignore[attr-defined]
            return False
        await self.presence_send(hello)
        # The rooms asked for here (a URL's) and the permanent rooms of a member, unasked.
        wanted = list(dict.fromkeys(rooms))
        with tenants.activate(self.presence.tenant):  # the memberships of its workspace
            permanent = await apermanent_rooms_to_join(user, wanted)
        for room in [*wanted, *permanent]:
            # The browser did not ask: a join an outage refused is owed (frames.join_unasked).
            error = await frames.join_unasked(self.presence, room)
            if error is not None:
                await self.presence_send(error)
        return True

    async def _presence_silent(self) -> None:
        """No heartbeat for LEASE_TTL: the browser is gone or stuck; closing
        ends the lease with the grace, and a live presence.js connects again."""
        try:
            await self.close(code=CLOSE_SILENT)  # type: ignore[attr-defined]
        except CLIENT_GONE:
            pass  # gone already: its disconnect, queued, cleans up

    async def presence_disconnect(self) -> None:
        """Ends the socket's lease with the grace (a reload does not flicker leave/join)."""
        if self.presence is not None:
            await self.presence.close()

    async def presence_receive(self, frame: Any) -> bool:
        """Handles ``frame`` (decoded JSON) if it is a presence frame; False when it is not
        (the project's own frame), True when it was answered (error frames included)."""
        if not frames.is_presence_frame(frame):
            return False
        if (
            self.presence is not None
            and not self.presence.closed
            and await self._presence_rate_ok()
        ):
            self._presence_check_sign_in()
            await frames.handle(self.presence, frame)
        return True

    def _presence_check_sign_in(self) -> None:
        """When due, the socket's sign-in is checked again, beside the frame (which goes on)."""
        sign_in: SignIn | None = self.__dict__.get("_presence_sign_in")
        if sign_in is not None and self.presence is not None and sign_in.due():
            spawn(self.presence.tasks, self._presence_signed_in_still(sign_in))

    async def _presence_signed_in_still(self, sign_in: SignIn) -> None:
        if not await sign_in.valid():  # closed as at a sign-out: presence.js connects again
            try:
                await self.close(code=CLOSE_SIGNED_OUT)  # type: ignore[attr-defined]
            except CLIENT_GONE:
                pass

    async def _presence_rate_ok(self) -> bool:
        refusal = self.presence_frames.refusal()
        if refusal is not None:
            await self.presence_send(refusal)
        return refusal is None

    async def presence_group_send(self, room: str, event: dict[str, Any]) -> None:
        """Sends a channel-layer ``event`` to every socket in ``room`` (every socket that joined
        it through presence, on any process), e.g. a chat message: ``{"type": "chat.message",
        ...}`` reaches each consumer's ``chat_message``. Sockets without that handler skip it."""
        with tenants.activate(self.presence.tenant if self.presence else None):
            group = dispatch.sockets_group(room)
        await self.channel_layer.group_send(group, event)  # type: ignore[attr-defined]

    async def presence_send(self, content: dict[str, Any]) -> None:
        """How presence frames reach the browser: JSON text. Override to wrap them."""
        await self.presence_send_text(json.dumps(content))

    async def presence_send_text(self, text: str) -> None:
        """A presence frame already encoded (JSON text) to the browser."""
        out = self.__dict__.get("_presence_out")
        if out is None:
            out = self._presence_out = websocket_send(self) or False
        try:
            if out:
                await out({"type": "websocket.send", "text": text})
            else:
                await self.send(text_data=text)  # type: ignore[attr-defined]
        except CLIENT_GONE:
            # The browser is gone (uvicorn's ClientDisconnected, daphne's): nobody to tell. The
            # websocket.disconnect waiting in the queue runs disconnect(), which cleans up.
            pass
        except RuntimeError as exc:
            # The server closed the socket (a restart's shutdown) while a background task (a
            # lease's recovery) still had a frame for it: the same, nobody left to tell.
            if "after sending 'websocket.close'" not in str(exc):
                raise

    # The channel layer's events for this socket ("presence.join" -> presence_join).
    async def presence_join(self, event: dict[str, Any]) -> None:
        if self.presence is not None:
            await self.presence.event(event)

    presence_leave = presence_update = presence_typing = presence_roomstate = presence_join

    async def presence_message(self, event: dict[str, Any]) -> None:
        """``presence.send_to_user()``: to this user's own connections, so no audience applies."""
        if self.presence is not None and not self.presence.closed:
            await self.presence_send(event)

    async def presence_permanent(self, event: dict[str, Any]) -> None:
        """The user's access to a room changed (a new membership, a revocation): apply it."""
        if self.presence is not None:
            await frames.on_own_event(self.presence, event)

    presence_revoke = presence_permanent

    async def presence_signed_out(self, event: dict[str, Any]) -> None:
        """A session of the user signed out (``presence.end_session``): the socket opened with
        it closes (4402), and presence.js connects again with the browser's cookies."""
        mine = self.presence_sign_in
        if self.presence is None or mine is None or event.get("session") != mine:
            return
        await self.presence.close()
        await self.close(code=CLOSE_SIGNED_OUT)  # type: ignore[attr-defined]

    async def presence_forgotten(self, event: dict[str, Any]) -> None:
        """The user was erased (``presence.forget``): the socket closes, for good (4401)."""
        if self.presence is not None:
            await self.presence.close(forgotten=True)
            await self.close(code=CLOSE_UNAUTHENTICATED)  # type: ignore[attr-defined]


class PresenceConsumer(PresenceConsumerMixin, OutageTolerantConsumer, AsyncJsonWebsocketConsumer):
    """The presence WebSocket (``ws/presence/``): one per browser tab or device."""

    async def connect(self) -> None:
        # Accept, then close: a close before the handshake reaches browsers as 1006, and
        # presence.js needs 4401 to know that reconnecting will not help.
        await self.accept()
        await self.presence_connect()

    async def disconnect(self, code: int) -> None:
        await self.presence_disconnect()

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        # Parsed here, not by receive_json: the size limit is checked before any decoding, and
        # every frame counts against the rate, bad ones too.
        if self.presence is None or self.presence.closed or not await self._presence_rate_ok():
            return
        self._presence_check_sign_in()
        try:
            frame = protocol.parse(text_data, bytes_data, int(conf.get("MAX_FRAME_BYTES")))
        except FrameError as exc:
            await self.presence_send(protocol.error_frame(exc.code, exc.detail))
            return
        await frames.handle(self.presence, frame)  # an unknown type gets "unknown_type"
