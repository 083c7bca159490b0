"""ASGI applications and URLconfs for the static files check, presence_app.W025
(tests/test_checks.py): asgi.py as installation.md once had it (Django's handler alone), as it
has it now (wrapped in ASGIStaticFilesHandler), and an application the check cannot see into."""

from channels.routing import ProtocolTypeRouter
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.contrib.staticfiles.views import serve
from django.core.asgi import get_asgi_application
from django.urls import include, path, re_path

django_asgi_app = get_asgi_application()

#: ProtocolTypeRouter({"http": get_asgi_application(), ...}): no static files under uvicorn.
bare = ProtocolTypeRouter({"http": django_asgi_app})
#: get_asgi_application() alone, as ASGI_APPLICATION.
plain = django_asgi_app
#: The fix: the HTTP side wrapped while DEBUG is on.
wrapped = ProtocolTypeRouter({"http": ASGIStaticFilesHandler(django_asgi_app)})


async def own_http(scope, receive, send):  # pragma: no cover - never called
    """An HTTP application of the project's own: it may serve static files, or not."""


other = ProtocolTypeRouter({"http": own_http})


class Urls:
    """presence_app's URLs, no static files."""

    urlpatterns = [path("presence/", include("presence_app.urls"))]


class StaticUrls:
    """presence_app's URLs and staticfiles' view at STATIC_URL (as static() adds with DEBUG)."""

    urlpatterns = [*Urls.urlpatterns, re_path(r"^static/(?P<path>.*)$", serve)]
