"""The admin: LastSeen's change list with live status, and the live dashboard."""

import time

import pytest
from django.contrib.auth.models import Permission
from django.contrib.staticfiles import finders
from django.urls import reverse

from presence_app import presence
from presence_app.core.connection import get_store
from presence_app.jobs.touches import batcher
from presence_app.models import LastSeen
from presence_app.web import dashboard

from .users import create_user, login_name, names

pytestmark = pytest.mark.django_db

URL = "/admin/presence_app/lastseen/dashboard/"


@pytest.fixture
def people(django_user_model, redis_client):
    """ann online in the lobby, ben idle, cy busy in two rooms, di offline, eve invisible (in
    the lobby too, where nobody but superusers may know it)."""
    users = {n: create_user(n) for n in ("ann", "ben", "cy", "di", "eve")}
    now = time.time()
    presence.connect("ann-1", users["ann"].pk)
    presence.join("lobby", "ann-1", users["ann"].pk)
    presence.connect("ben-1", users["ben"].pk, now=now - 400, device="phone")
    presence.heartbeat("ben-1", users["ben"].pk)
    presence.idle(users["ben"].pk)  # announced by the process that saw the activity stop
    presence.connect("cy-1", users["cy"].pk, device="desktop")
    presence.join("design", "cy-1", users["cy"].pk)
    presence.join("lobby", "cy-1", users["cy"].pk)
    presence.set_status(users["cy"].pk, "dnd", message="Deep work")
    presence.connect("eve-1", users["eve"].pk)
    presence.set_status(users["eve"].pk, "invisible")
    presence.join("lobby", "eve-1", users["eve"].pk)
    store = get_store()
    for minutes_ago, count in ((90, 1), (60, 3), (30, 2)):
        store.record_sample(count, now - minutes_ago * 60)
    return users


@pytest.fixture
def viewer(django_user_model):
    """Staff with nothing but the view permission on LastSeen."""
    user = create_user("viewer", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_lastseen"))
    return user


def states(response):
    return {state: count for state, _, count in response.context["by_state"]}


def listed(response):
    return [row.user.get_username() for row in response.context["rows"]]


def test_the_dashboard_for_a_superuser(client, admin_user, people):
    client.force_login(admin_user)
    response = client.get(URL)
    assert response.status_code == 200
    assert sorted(listed(response)) == names("ann", "ben", "cy", "eve")
    assert states(response) == {"online": 1, "idle": 1, "dnd": 1, "invisible": 1}
    assert response.context["online_total"] == 4
    assert response.context["rooms"] == [("lobby", 2), ("design", 1)]
    html = response.content.decode()
    assert '<div class="breadcrumbs">' in html and "Live presence" in html
    assert "presence_app/css/presence.css" in html and "presence_app/js/dashboard.js" in html
    assert "Deep work" in html and "design, lobby" in html and "desktop" in html
    # Three samples half an hour apart: three dots, no lines invented between them.
    assert html.count("<polyline") == 3
    assert 'id="presence-chart-data"' in html and "presence-updated" in html
    cy = next(
        row for row in response.context["rows"] if row.user.get_username() == login_name("cy")
    )
    assert cy.presence.state == "dnd" and cy.rooms == ["design", "lobby"]


def test_staff_with_the_view_permission_do_not_see_invisible_users(client, viewer, people):
    client.force_login(viewer)
    response = client.get(URL)
    assert response.status_code == 200
    assert sorted(listed(response)) == names("ann", "ben", "cy")
    assert states(response) == {"online": 1, "idle": 1, "dnd": 1}
    assert response.context["online_total"] == 3
    assert "eve" not in response.content.decode()


def test_others_are_refused(client, django_user_model, people):
    client.force_login(create_user("joe"))
    response = client.get(URL)
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    client.force_login(create_user("staffer", is_staff=True))
    assert client.get(URL).status_code == 403
    assert client.get("/admin/presence_app/presencedashboard/").status_code == 403


def test_redis_down_shows_a_banner(client, admin_user, redis_down):
    client.force_login(admin_user)
    response = client.get(URL)
    assert response.status_code == 200
    assert 'class="messagelist"' in response.content.decode()
    assert "Redis is unreachable" in response.content.decode()
    LastSeen.objects.create(user=admin_user, last_seen_at="2026-01-01T00:00Z")
    changelist = client.get("/admin/presence_app/lastseen/")
    assert changelist.status_code == 200 and changelist.context["cl"].result_count == 1
    assert "presence-dot" not in changelist.content.decode()  # no status rather than a wrong one


def test_search_paging_and_the_live_partial(client, admin_user, people, monkeypatch):
    client.force_login(admin_user)
    assert listed(client.get(URL, {"q": "CY"})) == names("cy")
    assert listed(client.get(URL, {"q": "di"})) == []  # offline: not listed
    monkeypatch.setattr(dashboard, "PER_PAGE", 3)
    batcher.flush()  # the admin's own requests' touch
    first, second = client.get(URL), client.get(URL, {"page": 2})
    assert first.context["pages"] == 2 and first.context["next_page"] == 2
    assert len(listed(first)) == 3 and len(listed(second)) == 2  # admin is online now too
    assert not set(listed(first)) & set(listed(second))
    partial = client.get(URL, {"partial": "1"}).content.decode()
    assert "presence-counts" in partial and "<html" not in partial


def test_the_dashboard_reads_a_page_in_two_pipelines(client, admin_user, people, redis_calls):
    client.force_login(admin_user)
    client.get(URL)
    batcher.flush()  # the admin is online now: later requests write nothing
    redis_calls.reset()
    client.get(URL)
    # Pipeline 1: the page's ids (the connected, the HTTP-only and the hidden), state counts,
    # chart, rooms. Pipeline 2: the page's presences (one script call) and each listed user's
    # rooms (their record: a field of one hash a shard).
    expected = {"evalsha": 5, "zrangebyscore": 1, "zrevrange": 1, "hget": 5}
    assert redis_calls.by_command() == expected


def test_the_last_seen_change_list_shows_live_status(client, admin_user, people, redis_calls):
    for name in ("ann", "di"):
        LastSeen.objects.create(user=people[name], last_seen_at="2026-01-01T00:00Z")
    client.force_login(admin_user)
    client.get("/admin/presence_app/lastseen/")
    redis_calls.reset()
    response = client.get("/admin/presence_app/lastseen/", {"q": ""})
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count("presence-dot presence-online") == 1
    assert html.count("presence-dot presence-offline") == 1
    assert 'href="/admin/presence_app/lastseen/dashboard/"' in html
    assert redis_calls.total == 1  # the statuses of the whole page in one get_many
    assert client.get("/admin/presence_app/lastseen/", {"q": "ann"}).context["cl"].result_count == 1


def test_the_last_seen_admin_is_read_only(client, admin_user, people):
    row = LastSeen.objects.create(user=people["ann"], last_seen_at="2026-01-01T00:00Z")
    client.force_login(admin_user)  # a superuser: every permission Django would grant
    response = client.get("/admin/presence_app/lastseen/")
    assert response.status_code == 200
    assert "delete_selected" not in response.context["cl"].model_admin.get_actions(
        response.wsgi_request
    )
    assert "delete_selected" not in response.content.decode()
    # Neither the action posted by hand nor the delete view removes a row.
    client.post(
        "/admin/presence_app/lastseen/",
        {"action": "delete_selected", "_selected_action": [row.pk], "post": "yes"},
    )
    assert client.get(f"/admin/presence_app/lastseen/{row.pk}/delete/").status_code == 403
    assert client.post(f"/admin/presence_app/lastseen/{row.pk}/delete/").status_code == 403
    assert client.get("/admin/presence_app/lastseen/add/").status_code == 403
    change = client.get(f"/admin/presence_app/lastseen/{row.pk}/change/")
    assert change.status_code == 200 and not change.context["has_change_permission"]
    assert LastSeen.objects.filter(pk=row.pk).exists()


def test_the_admin_index_links_to_the_dashboard(client, viewer):
    client.force_login(viewer)
    index = client.get(reverse("admin:index")).content.decode()
    assert "/admin/presence_app/presencedashboard/" in index
    response = client.get("/admin/presence_app/presencedashboard/")
    assert response.status_code == 302 and response["Location"] == URL


def test_the_dashboard_styles_follow_the_admin_theme():
    css = open(finders.find("presence_app/css/dashboard.css")).read()
    assert "var(--body-fg)" in css and "#" not in css.replace("#presence", "")


# -- the 24-hour chart ------------------------------------------------------------------------
NOW = 1_800_000_000.0  # 2027-01-15 08:00 UTC
MINUTE = int(NOW // 60) * 60


def minutes(first: int, last: int, count: int = 3) -> list[tuple[int, int]]:
    """A sample a minute from ``first`` to ``last`` minutes ago."""
    return [(MINUTE - m * 60, count) for m in range(first, last - 1, -1)]


def test_a_new_install_draws_no_ramp_from_24_hours_ago():
    chart = dashboard.chart(minutes(10, 1), NOW)
    assert len(chart["lines"]) == 1
    first_x = float(chart["lines"][0].split()[0].split(",")[0])
    assert first_x > 1420  # the line starts at its first sample, ten minutes ago
    assert chart["areas"][0].startswith(f"{first_x},120 ")  # and its area drops straight down
    assert [round(g["x"]) for g in chart["gaps"]] == [0]  # before it: marked as not sampled
    assert chart["gaps"][0]["width"] == first_x
    assert chart["samples"] == 10 and chart["latest"] == 3 and chart["peak"] == 3


def test_an_outage_is_a_gap_not_a_line():
    samples = minutes(300, 200, 4) + minutes(100, 1, 2)  # nothing for 100 minutes
    chart = dashboard.chart(samples, NOW)
    assert len(chart["lines"]) == 2 and len(chart["areas"]) == 2
    outage = chart["gaps"][1]
    assert outage["width"] == 100  # from the last sample before to the first after, in minutes
    data = chart["data"]
    assert data["first"] == MINUTE - 300 * 60 and len(data["counts"]) == 300
    assert data["counts"][0] == data["counts"][100] == 4 and data["counts"][-1] == 2
    assert data["counts"][101] is None
    # One lost sample is not an outage; a sweeper that stopped an hour ago leaves a gap at "now".
    assert len(dashboard.chart(minutes(10, 6) + minutes(4, 1), NOW)["lines"]) == 1
    lone = dashboard.chart(minutes(1, 1), NOW)  # the first sample of a new install
    assert lone["lines"] == ["1439.0,0.0 1439.0,0.0"]  # drawn as a dot
    stopped = dashboard.chart(minutes(120, 60), NOW)
    assert stopped["gaps"][-1]["x"] + stopped["gaps"][-1]["width"] == 1440


def test_the_axes_are_labelled():
    chart = dashboard.chart(minutes(600, 1, 37), NOW)
    assert [t["value"] for t in chart["y_ticks"]] == [0, 10, 20, 30, 40]
    assert chart["top"] == 40 and chart["y_ticks"][-1]["y"] == 0
    labels = [t["label"] for t in chart["x_ticks"]]
    assert labels == ["09:00", "12:00", "15:00", "18:00", "21:00", "00:00", "03:00", "06:00"]
    assert all(0 <= t["x"] <= 1440 for t in chart["x_ticks"])
    empty = dashboard.chart([], NOW)
    assert empty["lines"] == [] and [t["value"] for t in empty["y_ticks"]] == [0, 1]
    assert empty["gaps"] == [{"x": 0.0, "width": 1440.0, "pct": 0.0, "wide_pct": 100.0}]


def test_time_marks_follow_the_site_time_zone(settings):
    settings.TIME_ZONE = "Asia/Kolkata"  # UTC+05:30: marks on its own hours, not UTC's
    chart = dashboard.chart(minutes(30, 1), NOW)
    assert chart["data"]["tz"] == "Asia/Kolkata"
    # The 24 hours start at 13:30 there: the first mark is 15:00, 90 minutes in.
    assert chart["x_ticks"][0]["label"] == "15:00" and chart["x_ticks"][0]["x"] == 90


def test_the_live_region_speaks_only_of_failures(client, admin_user, people):
    client.force_login(admin_user)
    html = client.get(URL).content.decode()
    assert "aria-live" not in html.split('id="presence-dashboard"')[1].split(">")[0]
    assert 'id="presence-refresh-note" role="status"' in html


def test_the_dashboard_needs_no_humanize_app(client, admin_user, people, settings):
    """Failed on 89165fe: "'humanize' is not a registered tag library" without the app."""
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "django.contrib.humanize"]
    client.force_login(admin_user)
    response = client.get(URL)
    assert response.status_code == 200
    assert "ago" in response.content.decode()
