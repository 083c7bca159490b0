"""Settings of the demo project (see docs/development.md). Redis comes from REDIS_URL."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "demo-only-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "testserver"]

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    "presence_app",
    "project.demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "presence_app.middleware.PresenceMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("DJANGO_DB", BASE_DIR / "db.sqlite3"),
    }
}

CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
    }
}

# The channel layer: channels-redis' pub/sub layer, chosen by measurement (docs/scaling.md,
# bench/channel_layer.py): a group_send is one PUBLISH whatever the group's size, each process
# fans out to its own sockets in memory, nothing is dropped in bursts (RedisChannelLayer drops
# past its `capacity` of 100 messages waiting per process), and a crashed process leaves no
# stale group members. channels-redis does not speak Redis Cluster: give it plain Redis servers
# (several hosts spread the groups over them by consistent hashing).
# socket_timeout=None is needed by RedisChannelLayer (its blocking BZPOPMIN outlasts redis-py 8's
# 5 s default timeout: check presence_app.W003) and harmless here; keepalive detects dead peers.
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": None, "socket_keepalive": True}],
        },
    }
}

# LAST_SEEN_PRIVACY: each user picks who sees their last seen (the room page's status card).
PRESENCE = {"REDIS_URL": REDIS_URL, "LAST_SEEN_PRIVACY": True}

AUTH_PASSWORD_VALIDATORS = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # While Redis is away the pub/sub layer logs a traceback a second: one line per 10 s instead.
    "filters": {"redis_outage": {"()": "presence_app.failopen.ChannelLayerOutageFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "presence_app": {"handlers": ["console"], "level": "INFO"},
        "channels_redis.pubsub": {"filters": ["redis_outage"]},
    },
}
