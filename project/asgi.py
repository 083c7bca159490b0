"""ASGI entry point of the demo project: HTTP through Django, WebSockets through Channels.

The WebSocket stack is the one every project using presence_app copies: the origin must be one
of ALLOWED_HOSTS (no cross-site sockets), the session's user is put in the scope, and the
presence consumer refuses anonymous sockets itself (close code 4401).
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
# Django must be set up before anything imports models (the auth middleware does).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import path  # noqa: E402

from presence_app.realtime import collector  # noqa: E402
from presence_app.routing import websocket_urlpatterns  # noqa: E402
from project.demo.consumers import ChatConsumer  # noqa: E402

# A process holding thousands of sockets has millions of objects, and each full pass of the
# garbage collector walks them all: ~2 s at 10,000 sockets. presence_app.realtime.collector keeps
# them out of the passes' sight (start-up and what open connections hold frozen) and makes a full
# pass follow the connections that ended, which leave cycles in the server's own objects
# (uvicorn's). Benchmarks 6 and 15 in docs/benchmarks.md measure it against CPython's collector.
collector.tune()

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
