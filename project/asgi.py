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

# A process holding thousands of sockets has over a million objects the garbage collector walks.
# Leave out what start-up loaded (the framework, the URL conf, the models): a full collection
# never walks those again. The thresholds stay CPython's. Larger, rarer batches (50,000/20/100)
# made full collections rare and cut the join p99 at 10,000 sockets (docs/benchmarks.md,
# benchmark 6), but the server's own objects of an ended connection (uvicorn's) are a cycle
# that only a collection frees, and with the older generations collected that rarely, ended
# connections stayed: in the soak (benchmark 15) a process climbed for 17 minutes to 292 MiB,
# against 161 MiB flat with CPython's thresholds.
gc.collect()  # what start-up left over, before freezing the rest
gc.freeze()

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
