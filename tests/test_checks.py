"""System checks: each id raised by the setting that should raise it, and not otherwise."""

import pytest
from django.conf import settings
from django.core.checks import run_checks
from django.test import override_settings

from presence_app.testing import free_port


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
    ],
)
def test_invalid_settings_are_reported(presence, expected):
    assert expected in ids(**presence)


def test_unreachable_redis_is_a_warning():
    assert ids(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0") == ["presence_app.W001"]


def test_sentinels_must_be_host_port_pairs():
    assert "presence_app.E009" in ids(SENTINELS="127.0.0.1:26379")
    assert "presence_app.E009" in ids(SENTINELS=[("127.0.0.1", 26379)], CLUSTER=True, SHARDS=4)
