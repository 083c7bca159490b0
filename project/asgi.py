"""ASGI entry point of the demo project: HTTP through Django, WebSockets through Channels.

The WebSocket stack is the one every project using presence_app copies: the origin must be one
of ALLOWED_HOSTS (no cross-site sockets), the session's user is put in the scope, and the
presence consumer refuses anonymous sockets itself (close code 4401).
"""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
# Django must be set up before anything imports models (the auth middleware does).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import path  # noqa: E402

from presence_app.routing import websocket_urlpatterns  # noqa: E402
from project.demo.consumers import ChatConsumer  # noqa: E402

# A process holding thousands of sockets has over a million objects the garbage collector walks;
# with CPython's defaults it does so several times a minute under load, stalling every socket for
# up to 1.5 s at 10,000 sockets (docs/benchmarks.md, benchmark 6). Leave out what start-up
# loaded, and collect the young generations in larger, rarer batches. Full collections are left to
# CPython's own rule (one when a quarter of the heap is new since the last): the server's own
# objects of an ended connection (uvicorn's) are a cycle that only a full collection frees, and
# making those rare too kept every ended connection (the soak, benchmark 15).
gc.collect()  # what start-up left over, before freezing the rest
gc.freeze()
gc.set_threshold(50_000, 1, 1)

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(
                URLRouter(
                    [
                        *websocket_urlpatterns,  # ws/presence/: presence alone
                        path(
                            "ws/chat/", ChatConsumer.as_asgi()
                        ),  # the demo's chat, presence on the same socket
                    ]
                )
            )
        ),
    }
)
