"""WebSocket routes of presence_app; wrap them as in ``project/asgi.py``::

AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
"""

from django.urls import path

from .consumers import PresenceConsumer

websocket_urlpatterns = [
    path("ws/presence/", PresenceConsumer.as_asgi(), name="presence-socket"),
]
