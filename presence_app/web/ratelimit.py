"""Abuse limits of the JSON API: request rates per user and per client IP, and the size of an
``ids=`` list, checked before the view parses anything or asks Redis.

    @rate_limited          # 429 with Retry-After past API_USER_RATE / API_IP_RATE
    @bounded_ids           # 400 for a query over API_MAX_QUERY_BYTES or MAX_WATCHED_USERS ids
    @api_view
    def users(request): ...

The buckets live in the process (no Redis round trip, and they hold while Redis is away): with
N processes behind a balancer a client gets up to N times the rate. Each table keeps at most
``MAX_KEYS`` clients; past that, the ones with a full bucket (idle) are dropped. The client IP
is ``REMOTE_ADDR``: behind a proxy, have it set from the proxy's header (as for Django's own
security features).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext as _

from .. import conf
from ..core.limits import KeyedBuckets

users, ips = KeyedBuckets(), KeyedBuckets()


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting == "PRESENCE":
        users.clear()
        ips.clear()


def refused(detail: str, status: int) -> JsonResponse:
    """A refusal: never cached, and not one log line per request (django.request would log
    each 4xx: an abuser would flood the log)."""
    response = JsonResponse({"detail": detail}, status=status)
    add_never_cache_headers(response)
    response._has_been_logged = True  # django.utils.log.log_response skips it
    return response


def too_many(retry_after: float) -> JsonResponse:
    seconds = max(1, math.ceil(retry_after))
    response = refused(_("Too many requests. Try again in %(n)s seconds.") % {"n": seconds}, 429)
    response["Retry-After"] = str(seconds)
    return response


def check_rate(request: HttpRequest) -> HttpResponse | None:
    """429 (with Retry-After) when the client IP or the signed-in user is over its rate."""
    s = conf.get_settings()
    wait = ips.take(request.META.get("REMOTE_ADDR", ""), s["API_IP_RATE"], s["API_IP_BURST"])
    user = getattr(request, "user", None)
    if not wait and user is not None and user.is_authenticated:
        wait = users.take(user.pk, s["API_USER_RATE"], s["API_USER_BURST"])
    return too_many(wait) if wait else None


def rate_limited(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Decorates a view with :func:`check_rate`."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return check_rate(request) or view(request, *args, **kwargs)

    return wrapper


def check_ids(request: HttpRequest) -> HttpResponse | None:
    """400 for a query string over API_MAX_QUERY_BYTES, or naming more than MAX_WATCHED_USERS
    ids: measured on the raw string (its length, its separators), before Django parses it."""
    raw = request.META.get("QUERY_STRING", "")
    limit = conf.get("API_MAX_QUERY_BYTES")
    if len(raw) > limit:
        return refused(
            _("The query is too long: it may be at most %(n)s bytes.") % {"n": limit}, 400
        )
    most = conf.get("MAX_WATCHED_USERS")
    # Each id is a comma (or %2C) or an id= pair: a count bounded by the length, no split.
    named = raw.count(",") + raw.upper().count("%2C") + raw.count("=")
    if named > most:
        return refused(_("A request may name at most %(max)s ids.") % {"max": most}, 400)
    return None


def bounded_ids(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Decorates a view with :func:`check_ids`."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return check_ids(request) or view(request, *args, **kwargs)

    return wrapper
