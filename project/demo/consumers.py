"""The demo's chat socket: presence and chat messages on one WebSocket per tab.

A project's own consumer carries presence with :class:`~presence_app.consumers.PresenceConsumerMixin`:
three calls (connect, disconnect, receive) and everything presence does — lease, heartbeats,
rooms, grace, sweep, events — rides on the chat's socket. Chat messages go to the sockets that
joined the room; nothing is stored (the demo is about presence).
"""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from presence_app.consumers import PresenceConsumerMixin

MAX_MESSAGE_LENGTH = 500


class ChatConsumer(PresenceConsumerMixin, AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        await self.accept()
        await self.presence_connect()  # closes anonymous sockets with 4401

    async def disconnect(self, code: int) -> None:
        await self.presence_disconnect()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if await self.presence_receive(content):
            return
        if isinstance(content, dict) and content.get("type") == "chat.message":
            await self.post(content)
        else:
            await self.send_json(
                {
                    "type": "error",
                    "code": "unknown_type",
                    "detail": "The server does not know this frame type.",
                }
            )

    async def post(self, frame: dict[str, Any]) -> None:
        room, text = frame.get("room"), frame.get("text")
        if self.presence is None or room not in self.presence.rooms:
            await self.refuse("not_joined", "join the room before writing in it", room)
            return
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_MESSAGE_LENGTH:
            await self.refuse("invalid", f"a message is 1-{MAX_MESSAGE_LENGTH} characters", room)
            return
        await self.presence_group_send(
            room,
            {
                "type": "chat.message",
                "room": room,
                "user": self.presence.user_id,
                "name": self.scope["user"].get_username(),
                "text": text.strip(),
            },
        )

    async def refuse(self, code: str, detail: str, room: Any) -> None:
        await self.send_json(
            {
                "type": "error",
                "code": code,
                "detail": detail,
                "frame": "chat.message",
                "room": room if isinstance(room, str) else None,
            }
        )

    async def chat_message(self, event: dict[str, Any]) -> None:
        await self.send_json(event)
