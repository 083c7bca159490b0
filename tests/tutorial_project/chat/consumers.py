import json

from channels.generic.websocket import AsyncWebsocketConsumer

from presence_app.consumers import PresenceConsumerMixin


class ChatConsumer(PresenceConsumerMixin, AsyncWebsocketConsumer):
    async def connect(self):
        self.room_name = self.scope["url_route"]["kwargs"]["room_name"]
        self.room_group_name = f"chat_{self.room_name}"

        # Join room group
        await self.channel_layer.group_add(self.room_group_name, self.channel_name)

        await self.accept()
        # Presence: the user is in the room of the URL while this socket is open. An anonymous
        # socket is closed (code 4401) and False returned.
        await self.presence_connect(rooms=[self.room_name])

    async def disconnect(self, close_code):
        await self.presence_disconnect()  # the room sees a leave after the grace
        # Leave room group
        await self.channel_layer.group_discard(self.room_group_name, self.channel_name)

    # Receive message from WebSocket
    async def receive(self, text_data):
        text_data_json = json.loads(text_data)
        if await self.presence_receive(text_data_json):  # heartbeat, status, typing ...
            return
        message = text_data_json["message"]

        # Send message to room group
        await self.channel_layer.group_send(
            self.room_group_name, {"type": "chat.message", "message": message}
        )

    # Receive message from room group
    async def chat_message(self, event):
        message = event["message"]

        # Send message to WebSocket (typed: presence.js hands the page frames with a type)
        await self.send(text_data=json.dumps({"type": "chat.message", "message": message}))
