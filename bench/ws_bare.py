"""Benchmark 6's baseline: the least a Channels site does for the same frames, with no presence
state at all. The same ASGI stack as project/asgi.py (origin check, session auth), a JSON
consumer that answers each heartbeat with an ack, and on a join adds the socket to the room's
group and announces it there with one ``group_send`` (on leave, the reverse). What the presence
consumer adds on top of this (the lease, the coalesced writes, the store's scripts, the room
snapshot) is what the ratios measure.
"""

from __future__ import annotations

import gc
import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.ws_settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.consumer import get_handler_name  # noqa: E402
from channels.generic.websocket import AsyncJsonWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import path  # noqa: E402


class BareConsumer(AsyncJsonWebsocketConsumer):
    async def dispatch(self, message: dict[str, Any]) -> None:
        # As the presence consumer does: no hop to Channels' sync thread to close stale database
        # connections before every message (a stock consumer pays it, ~3x fewer acks a second).
        await getattr(self, get_handler_name(message))(message)

    async def connect(self) -> None:
        user = self.scope["user"]
        await self.accept()
        if not user.is_authenticated:
            await self.close(code=4401)
            return
        self.user_id = str(user.pk)
        await self.send_json({"type": "hello", "user": self.user_id})

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        kind, room = content.get("type"), content.get("room")
        if kind == "heartbeat":
            await self.send_json({"type": "heartbeat.ack"})
        elif kind in ("join", "leave"):
            group = f"bare.{room}"
            if kind == "join":
                await self.channel_layer.group_add(group, self.channel_name)
            event = {
                "type": f"presence.{kind}",
                "user": self.user_id,
                "room": room,
                "state": "online",
            }
            await self.channel_layer.group_send(group, event)  # the others first, as ours
            if kind == "join":
                await self.send_json({"type": "presence.state", "room": room, "members": []})
            else:
                await self.channel_layer.group_discard(group, self.channel_name)

    async def presence_join(self, event: dict[str, Any]) -> None:
        await self.send_json(event)

    presence_leave = presence_join


gc.collect()  # as project/asgi.py does
gc.freeze()
gc.set_threshold(50_000, 20, 100)

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter([path("ws/presence/", BareConsumer.as_asgi())]))
        ),
    }
)
