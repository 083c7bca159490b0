"""presence_app.contrib.drf on Django REST framework: a list's presences in one Redis round
trip (counted on the real server), the viewer's AUDIENCE, the "online only" filter."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import override_settings
from django.urls import path

from presence_app import presence

pytest.importorskip("rest_framework")

from rest_framework import generics, serializers  # noqa: E402
from rest_framework.pagination import PageNumberPagination  # noqa: E402
from rest_framework.renderers import JSONRenderer  # noqa: E402

from presence_app.contrib.drf import OnlineFilter, PresenceField  # noqa: E402

from ..users import create_user, login_name  # noqa: E402

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]


class MemberSerializer(serializers.ModelSerializer):
    # The login of any user model (a username, or an email: tests/settings_uuid.py).
    username = serializers.CharField(source="get_username", read_only=True)
    presence = PresenceField(source="*")

    class Meta:
        model = get_user_model()
        fields = ["id", "username", "presence"]


class Pages(PageNumberPagination):
    page_size = 20


class Members(generics.ListAPIView):
    queryset = get_user_model().objects.order_by(get_user_model().USERNAME_FIELD)
    serializer_class = MemberSerializer
    renderer_classes = [JSONRenderer]
    filter_backends = [OnlineFilter]


class PagedMembers(Members):
    pagination_class = Pages


# Posts by authors: the field reads a foreign key's id (no query for the author), and a nested
# author serializer reads through the relation.
class Note:
    def __init__(self, pk, author):
        self.pk, self.author, self.author_id = pk, author, author.pk


class AuthorSerializer(serializers.Serializer):
    username = serializers.CharField(source="get_username")
    presence = PresenceField(source="*", fields=["state"])


class NoteSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    author_state = PresenceField(source="author_id", fields=["state", "message"])
    author = AuthorSerializer()


urlpatterns = [path("members/", Members.as_view()), path("paged/", PagedMembers.as_view())]


@pytest.fixture
def crowd(django_user_model, redis_client):
    """60 users: every third online, one of them busy, one invisible."""
    users = [create_user(f"user{i:02}") for i in range(60)]
    for user in users[::3]:
        presence.touch(user)
    presence.set_status(users[3], "dnd", message="Deep work")
    presence.set_status(users[6], "invisible")
    return users


def name(row):
    """The name a user was created with ("user01"), whatever their login spells."""
    return row["username"].split("@")[0]


def by_name(rows):
    return {name(row): row["presence"] for row in rows}


def test_a_list_reads_every_presence_in_one_round_trip(client, crowd, redis_calls):
    client.force_login(crowd[1])
    redis_calls.reset()
    response = client.get("/members/")
    assert response.status_code == 200
    assert redis_calls.by_command() == {"evalsha": 1}  # one get_many for 60 users
    rows = by_name(response.json())
    assert len(rows) == 60
    assert rows["user00"]["state"] == "online" and rows["user01"]["state"] == "offline"
    assert rows["user03"]["state"] == "dnd" and rows["user03"]["message"] == "Deep work"
    assert rows["user06"]["state"] == "offline"  # invisible, to everybody else
    assert set(rows["user00"]) == {
        "user", "state", "last_seen", "last_active", "message", "emoji", "device",
        "last_seen_approx",
    }  # fmt: skip


def test_a_page_of_a_paginated_list_is_one_round_trip(client, crowd, redis_calls):
    client.force_login(crowd[6])
    redis_calls.reset()
    body = client.get("/paged/", {"page": 2}).json()
    assert redis_calls.by_command() == {"evalsha": 1}
    rows = by_name(body["results"])
    assert len(rows) == 20 and "user20" in rows
    redis_calls.reset()
    mine = by_name(client.get("/paged/").json()["results"])
    assert mine["user06"]["state"] == "invisible"  # herself: she sees her own state
    assert redis_calls.by_command() == {"evalsha": 1}


def test_nested_and_by_id_fields_share_the_round_trip(crowd, redis_calls, rf):
    notes = [Note(n, crowd[n % 7]) for n in range(30)]
    request = rf.get("/")
    request.user = crowd[1]
    redis_calls.reset()
    data = NoteSerializer(notes, many=True, context={"request": request}).data
    assert redis_calls.by_command() == {"evalsha": 1}
    assert data[3]["author_state"] == {"state": "dnd", "message": "Deep work"}
    assert data[3]["author"]["presence"] == {"state": "dnd"}
    assert data[1]["author"] == {"username": login_name("user01"), "presence": {"state": "offline"}}
    # One object alone: one round trip too.
    redis_calls.reset()
    one = NoteSerializer(notes[0], context={"request": request}).data
    assert one["author_state"]["state"] == "online"
    assert redis_calls.by_command() == {"evalsha": 1}


#: Who may see whom for the AUDIENCE test: everybody sees user00 and themselves only.
def only_user00(viewer, user_ids):
    User = get_user_model()
    shown = {viewer, str(User.objects.get(**{User.USERNAME_FIELD: login_name("user00")}).pk)}
    return [u for u in user_ids if u in shown]


def test_the_viewers_audience_applies(client, crowd):
    policy = {**settings.PRESENCE, "AUDIENCE": "tests.contrib.test_drf.only_user00"}
    with override_settings(PRESENCE=policy):
        client.force_login(crowd[9])  # online, like user00 and user03
        rows = by_name(client.get("/members/").json())
        assert rows["user00"]["state"] == "online"
        assert rows["user09"]["state"] == "online"  # themself
        assert rows["user03"] == {
            "user": str(crowd[3].pk), "state": "offline", "last_seen": None,
            "last_active": None, "message": "", "emoji": "", "device": "",
            "last_seen_approx": "",
        }  # fmt: skip
        # Signed out: a visitor is somebody too, and sees as the policy says.
        client.logout()
        online = client.get("/members/", {"online": "1"}).json()
        assert [name(r) for r in online] == ["user00"]


def test_online_only_filter(client, crowd, redis_calls):
    client.force_login(crowd[1])
    redis_calls.reset()
    rows = client.get("/members/", {"online": "1"}).json()
    expected = sorted(u.get_username() for u in crowd[::3] if u != crowd[6])  # not the invisible
    assert [r["username"] for r in rows] == expected
    assert all(r["presence"]["state"] in ("online", "dnd") for r in rows)
    # The online ids (the connected's and the HTTP-only's), then the page's presences.
    assert redis_calls.total == 3
    assert len(client.get("/members/", {"online": "0"}).json()) == 60


def test_online_filter_on_a_foreign_key(crowd):
    from rest_framework.test import APIRequestFactory, force_authenticate

    from presence_app.models import LastSeen  # a model with a user foreign key

    for user in crowd[:10]:
        LastSeen.objects.update_or_create(user=user, defaults={"last_seen_at": "2026-01-01T00:00Z"})

    class LastSeenSerializer(serializers.ModelSerializer):
        presence = PresenceField(source="user_id", fields=["state"])

        class Meta:
            model = LastSeen
            fields = ["user", "presence"]

    class Recent(generics.ListAPIView):
        queryset = LastSeen.objects.order_by("user_id")
        serializer_class = LastSeenSerializer
        renderer_classes = [JSONRenderer]
        filter_backends = [OnlineFilter]
        presence_user_field = "user"

    request = APIRequestFactory().get("/recent/", {"online": "true"})
    force_authenticate(request, crowd[1])
    response = Recent.as_view()(request)
    response.render()
    # in primary-key order (a UUID's is not the order the users were created in)
    assert [r["user"] for r in response.data] == sorted([crowd[0].pk, crowd[3].pk, crowd[9].pk])


def test_redis_away_reads_everybody_offline(client, crowd, redis_down):
    client.force_login(crowd[1])
    rows = by_name(client.get("/members/").json())
    assert {r["state"] for r in rows.values()} == {"offline"}
    assert client.get("/members/", {"online": "1"}).json() == []
