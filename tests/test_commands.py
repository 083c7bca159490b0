"""``manage.py presence stats | sweep [--loop] | flush | clear [--yes]``."""

import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from presence_app import presence
from presence_app.core.connection import get_store
from presence_app.models import LastSeen


def run(*args):
    out = StringIO()
    call_command("presence", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def people(django_user_model, redis_client):
    users = [django_user_model.objects.create_user(n) for n in ("ann", "ben", "cy")]
    presence.connect("ann-1", users[0].pk)
    presence.join("lobby", "ann-1", users[0].pk)
    presence.touch(users[1].pk)
    presence.set_status(users[1].pk, "dnd")
    presence.touch(users[2].pk)
    presence.set_status(users[2].pk, "invisible")
    get_store().record_sample(2, time.time() - 60)
    return users


@pytest.mark.django_db
def test_stats(people):
    LastSeen.objects.create(user=people[0], last_seen_at="2026-01-01T00:00Z")
    # cy's row: going invisible is going offline to the public (user_offline writes LastSeen)
    assert LastSeen.objects.filter(user=people[2]).exists()
    out = run("stats")
    assert "online: 2 (online 1, idle 0, dnd 1); invisible: 1" in out
    assert "lobby: 1" in out
    assert "samples (24 h): 1, peak 2" in out
    assert "last seen rows: 2" in out


@pytest.mark.django_db(transaction=True)  # the sweep announces from its own event loop thread
def test_sweep_evicts_and_records_last_seen(django_user_model, redis_client):
    ann = django_user_model.objects.create_user("ann")
    presence.touch(ann.pk, now=time.time() - 120)  # the online window ended a minute ago
    out = run("sweep")
    assert "swept: 1 transitions (1 offline, 0 room leaves)" in out
    assert LastSeen.objects.get(user=ann)
    assert get_store().history(0)  # the sweep also took the minute's sample
    assert "swept: 0 transitions" in run("sweep")


@pytest.mark.django_db(transaction=True)  # a sweep also flushes last seen when that is due
def test_sweep_loop_runs_until_stopped(monkeypatch, redis_client, settings):
    from presence_app.management.commands.presence import Command

    report, rounds = Command._report_sweep, []

    def report_then_stop_after_two(self, transitions):
        report(self, transitions)
        rounds.append(transitions)
        if len(rounds) == 2:
            raise KeyboardInterrupt  # what Ctrl-C does to the loop

    monkeypatch.setattr(Command, "_report_sweep", report_then_stop_after_two)
    settings.PRESENCE = {**settings.PRESENCE, "SWEEP_INTERVAL": 0.05}
    out = run("sweep", "--loop")
    assert out.count("swept: 0 transitions") == 2 and out.endswith("Stopped.\n")


@pytest.mark.django_db
def test_flush(people):
    LastSeen.objects.all().delete()  # cy's row, written when cy went invisible
    assert "flushed: 2 last seen rows" in run("flush")
    assert sorted(LastSeen.objects.values_list("user__username", flat=True)) == ["ann", "ben"]


def test_clear_asks_first(monkeypatch, redis_client):
    presence.touch(1)
    monkeypatch.setattr("builtins.input", lambda prompt: "no")
    assert "Cancelled." in run("clear")
    assert presence.get(1).state == "online"
    monkeypatch.setattr("builtins.input", lambda prompt: "yes")
    assert "cleared:" in run("clear")
    assert presence.get(1).state == "offline"


def test_clear_yes_does_not_ask(monkeypatch, redis_client):
    presence.touch(1)
    monkeypatch.setattr("builtins.input", lambda prompt: pytest.fail("asked"))
    out = run("clear", "--yes")
    assert out.startswith("cleared: ") and int(out.split()[1]) > 0
    assert redis_client.dbsize() == 0


@pytest.mark.django_db
def test_redis_down_is_a_command_error(redis_down):
    with pytest.raises(CommandError, match="cannot be reached"):
        run("stats")
