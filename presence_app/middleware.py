"""PresenceMiddleware: requests of signed-in users keep them online and active.

Cheap by design: a request never waits on Redis. At most once per user per process per
``TOUCH_INTERVAL`` (a bounded in-memory throttle) the user is handed to the process' touch batch,
which a background thread writes in one round trip a second (:mod:`presence_app.jobs.touches`). No
database write, nothing for static, media and ``SKIP_PATHS``. Fails open: with Redis away pages
are served and one warning is logged per interval (``failopen``). Place it after
``AuthenticationMiddleware``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse
from django.utils.functional import LazyObject, empty

from . import conf
from .core import tenants
from .core.limits import Throttle
from .core.rules import user_key
from .failopen import breaker
from .jobs.touches import TOUCHED, batcher, is_activity

#: Users whose last touch this process remembers (more are forgotten early: an extra touch).
THROTTLE_SIZE = 50_000


class PresenceMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.throttle = Throttle(float(conf.get("TOUCH_INTERVAL")), max_keys=THROTTLE_SIZE)
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if self.async_mode:
            return self.__acall__(request)
        # TENANT: the request's views, tags and API calls read and write in its workspace.
        wanted = self._wanted(request)
        setattr(request, TOUCHED, wanted)
        with tenants.activate(tenants.resolve(request)) as tenant:
            response = self.get_response(request)
        if wanted and not breaker.is_open:
            uid = self._due(getattr(request, "user", None), tenant)
            if uid is not None:
                batcher.add(uid, is_activity(request), tenant)
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        wanted = self._wanted(request) and hasattr(request, "auser")
        setattr(request, TOUCHED, wanted)
        with tenants.activate(await tenants.aresolve(request)) as tenant:
            response = await self.get_response(request)
        if wanted and not breaker.is_open:
            user = _loaded_user(request)
            uid = self._due(user if user is not None else await request.auser(), tenant)
            if uid is not None:
                batcher.add(uid, is_activity(request), tenant)
        return response

    # -- the shared part of both paths ----------------------------------------------------------
    @staticmethod
    def _wanted(request: HttpRequest) -> bool:
        """Worth looking at the user: not an asset or skipped path, Redis not known away."""
        if breaker.is_open:
            return False
        skipped = ["/" + p.lstrip("/") for p in conf.get("SKIP_PATHS")]
        # STATIC_URL and MEDIA_URL come with the script prefix; unset, MEDIA_URL reads "/".
        for url in (settings.STATIC_URL, settings.MEDIA_URL):
            if url and url.startswith("/") and url != "/":
                skipped.append(url)
        return not request.path.startswith((*skipped, *stream_paths()))

    def _due(self, user: Any, tenant: str | None = None) -> str | None:
        """The user's id when a write is due: signed in and not written this interval."""
        uid = user_key(user) if getattr(user, "is_authenticated", False) else None
        if uid is None:
            return None
        self.throttle.interval = float(conf.get("TOUCH_INTERVAL"))
        return uid if self.throttle.ready(uid if tenant is None else (tenant, uid)) else None


@cache
def stream_paths() -> tuple[str, ...]:
    """The SSE stream and its REST calls: their session keeps their presence (a heartbeat or
    watch POST is not a person's activity), as a socket's does."""
    try:
        return (
            reverse("presence_app:sse"),
            reverse("presence_app:api-stream", args=["x"]).rsplit("/", 2)[0] + "/",
        )
    except NoReverseMatch:  # the project did not include presence_app.urls
        return ()


def _loaded_user(request: HttpRequest) -> Any:
    """``request.user`` when reading it costs no query: set by login() / logout(), or the lazy
    user already loaded (by the view, ``login_required``, another middleware); else None.
    Under ASGI a sync view loads ``request.user``, not ``auser()``'s cache: awaiting
    ``auser()`` then would load the user a second time (a thread hop and a query per request)."""
    user = getattr(request, "user", None)
    if isinstance(user, LazyObject):
        user = user._wrapped
        return None if user is empty else user
    return user
