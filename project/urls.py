from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.views import serve
from django.urls import include, path, re_path

from project.demo.users import ADMIN, DEMO_PASSWORD, DEMO_USERS, login_name

# The login page lists the demo's users (it is a demo: their passwords are in docs/development.md).
login = auth_views.LoginView.as_view(
    redirect_authenticated_user=True,
    extra_context={
        # (name, what it logs in with: the name, or an email address for an email user model)
        "demo_users": [(name, login_name(name)) for name in DEMO_USERS],
        "demo_password": DEMO_PASSWORD,
        "demo_admin": (login_name(ADMIN[0]), ADMIN[1]),
    },
)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", login, name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("presence/", include("presence_app.urls")),
    path("", include("project.demo.urls")),
]


async def serve_static(request, path):
    """staticfiles' development view under an ASGI server (uvicorn, daphne), as runserver
    would serve them: the file is read in a thread and streamed asynchronously (Django warns
    about sync iterators on an async server). A production site uses its web server or
    WhiteNoise instead."""
    response = await sync_to_async(serve)(request, path)
    if response.streaming and not response.is_async:
        chunks = await sync_to_async(list)(response.streaming_content)

        async def content():
            for chunk in chunks:
                yield chunk

        response.streaming_content = content()
    return response


if settings.DEBUG:
    prefix = settings.STATIC_URL.lstrip("/")
    urlpatterns.append(re_path(rf"^{prefix}(?P<path>.*)$", serve_static))
