"""What carries a connection: one :class:`~presence_app.realtime.session.PresenceSession` per
socket or stream, its client frames and protocol, its channel-layer groups, the process's
heartbeat and room-state batches, and the transports (SSE, REST, htmx) beside the WebSocket
consumer (:mod:`presence_app.consumers`, kept at the top as the public path)."""
