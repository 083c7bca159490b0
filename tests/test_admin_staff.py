"""Issue 41: staff who are not superusers, and workspaces, in the admin.

The LastSeen rows are the truth (exact last seens, devices, whatever AUDIENCE and the users'
privacy choices say): superusers only. Staff with the view permission open the live dashboard,
read through their own viewer; its 24-hour chart (the site's own samples) is withheld from them
under an AUDIENCE policy. Both pages read the current workspace only. Each test failed on
47aebdf: the change list showed other staff every row, raw; the chart counted users outside
their audience; the rows of every workspace were listed in each.
"""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.test import override_settings
from django.urls import reverse

from presence_app import presence, tenants
from presence_app.core.connection import get_store
from presence_app.models import LastSeen

from .access.test_audience import RELATION
from .users import create_user, login_name

pytestmark = pytest.mark.django_db

DASHBOARD = "/admin/presence_app/lastseen/dashboard/"
CHANGELIST = "/admin/presence_app/lastseen/"
WITHHELD = "presence-chart-withheld"


def tenant_by_header(source):
    """The workspace a request names in ``X-Workspace`` (the admin's change list takes no
    unknown query parameter). A test's hook: a site maps only workspaces it created."""
    return source.headers.get("X-Workspace") if hasattr(source, "headers") else None


def with_presence(**more):
    return override_settings(PRESENCE={**settings.PRESENCE, **more})


@pytest.fixture
def staff(redis_client):
    """viewer: staff with the view permission on LastSeen, not a superuser."""
    user = create_user("viewer", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_lastseen"))
    return user


@pytest.fixture
def site(redis_client):
    """ann (online, on her phone, shows her last seen to nobody) and cy (offline since an hour,
    her row in the database), samples for the chart."""
    ann, cy = create_user("ann"), create_user("cy")
    now = time.time()
    presence.connect("ann-1", ann, device="phone")
    presence.set_privacy(ann, "nobody")
    LastSeen.objects.create(user=cy, last_seen_at="2019-03-04T09:15Z", device="tablet")
    LastSeen.objects.create(user=ann, last_seen_at="2019-03-05T10:30Z", device="phone")
    for minutes_ago, count in ((30, 7), (20, 9), (10, 8)):
        get_store().record_sample(count, now - minutes_ago * 60)
    return ann, cy


def test_staff_who_are_not_superusers_see_no_raw_row(client, staff, site, admin_user):
    ann, cy = site
    client.force_login(staff)
    assert client.get(CHANGELIST).status_code == 403
    row = LastSeen.objects.get(user=cy)
    for page in ("change", "history"):
        assert client.get(f"{CHANGELIST}{row.pk}/{page}/").status_code == 403
    index = client.get(reverse("admin:index")).content.decode()
    assert CHANGELIST + '"' not in index  # no "Last seen" entry leading to a refusal
    assert "/admin/presence_app/presencedashboard/" in index  # the dashboard is theirs
    page = client.get(DASHBOARD)
    assert page.status_code == 200
    html = page.content.decode()
    assert "tablet" not in html and "2019" not in html  # nothing of the rows
    # Superusers read the rows, exact.
    client.force_login(admin_user)
    rows = client.get(CHANGELIST)
    assert rows.status_code == 200 and rows.context["cl"].result_count == 2
    assert "tablet" in rows.content.decode()


def test_the_chart_is_withheld_from_staff_under_an_audience_policy(client, staff, site, admin_user):
    ann, cy = site
    RELATION.clear()
    RELATION[str(staff.pk)] = set()  # the viewer's audience: nobody
    try:
        with with_presence(AUDIENCE="tests.access.test_audience.policy"):
            client.force_login(staff)
            page = client.get(DASHBOARD)
            assert page.status_code == 200 and page.context["chart"] is None
            html = page.content.decode()
            assert "presence-chart-data" not in html and "<polyline" not in html
            assert WITHHELD in html
            assert page.context["online_total"] == 0 and page.context["rows"] == []
            assert login_name("ann") not in html
            client.force_login(admin_user)  # superusers: the truth, the chart included
            html = client.get(DASHBOARD).content.decode()
            assert "presence-chart-data" in html and WITHHELD not in html
        # Without a policy everybody's audience is everyone: the chart counts what they may see.
        client.force_login(staff)
        html = client.get(DASHBOARD).content.decode()
        assert "presence-chart-data" in html and WITHHELD not in html
    finally:
        RELATION.clear()


def test_the_admin_reads_the_current_workspace(client, admin_user, redis_client):
    ann, bob = create_user("ann"), create_user("bob")
    now = time.time()
    for user, workspace in ((ann, "acme"), (bob, "globex")):
        with tenants.activate(workspace):
            presence.touch(user, now=now - 600)
            presence.sweep(now=now)  # the offline writes the workspace's row
    with with_presence(TENANT="tests.test_admin_staff.tenant_by_header"):
        client.force_login(admin_user)
        for workspace, user in (("acme", ann), ("globex", bob)):
            page = client.get(CHANGELIST, headers={"X-Workspace": workspace})
            assert [row.user_id for row in page.context["cl"].result_list] == [user.pk]
        assert client.get(CHANGELIST).context["cl"].result_count == 0  # the default space


def test_a_membership_added_in_the_admin_is_its_workspace_s(admin_client, redis_client):
    from presence_app import rooms

    ann = create_user("ann")
    url = "/admin/presence_app/roommembership/add/"
    with with_presence(TENANT="tests.test_admin_staff.tenant_by_header"):
        acme = {"X-Workspace": "acme"}
        added = admin_client.post(url, {"user": ann.pk, "room": "general"}, headers=acme)
        assert added.status_code == 302
        again = admin_client.post(url, {"user": ann.pk, "room": "general"}, headers=acme)
        assert again.status_code == 200  # the form's error, not an IntegrityError
        assert "This user is a member of this room already." in again.content.decode()
        globex = {"X-Workspace": "globex"}
        assert admin_client.post(url, {"user": ann.pk, "room": "general"}, headers=globex)[
            "Location"
        ].endswith("/roommembership/")
        listed = admin_client.get("/admin/presence_app/roommembership/", headers=globex)
        assert listed.context["cl"].result_count == 1
    for workspace in ("acme", "globex"):
        with tenants.activate(workspace):
            assert rooms.member_rooms(ann) == ["general"]
    assert rooms.member_rooms(ann) == []  # nothing in the default space
