"""The JSON API: batched presence, the online list with paging, room members; login required."""

import pytest
from django.conf import settings
from django.test import override_settings

from presence_app import presence
from presence_app.jobs.touches import batcher

from ..users import create_user, login_name
from ..users import names as logins

pytestmark = pytest.mark.django_db


def can_join(user, room):
    return not room.startswith("staff")


@pytest.fixture
def people(django_user_model, redis_client):
    users = {n: create_user(n) for n in ("ann", "ben", "cy", "eve")}
    presence.connect("ann-1", users["ann"].pk, device="desktop")
    presence.join("lobby", "ann-1", users["ann"].pk)
    presence.connect("cy-1", users["cy"].pk)
    presence.join("lobby", "cy-1", users["cy"].pk)
    presence.set_status(users["cy"].pk, "dnd", message="Focus")
    presence.connect("eve-1", users["eve"].pk)
    presence.join("lobby", "eve-1", users["eve"].pk)
    presence.set_status(users["eve"].pk, "invisible")
    return users


@pytest.fixture
def ben(client, people):
    client.force_login(people["ben"])
    return people["ben"]


def test_login_is_required(client, people):
    for url in ("users/?ids=1", "online/", "rooms/lobby/"):
        response = client.get(f"/presence/api/{url}")
        assert response.status_code == 401 and "detail" in response.json()


def test_presence_of_a_list_of_ids_in_one_round_trip(client, ben, people, redis_calls):
    ids = [people[n].pk for n in ("cy", "ann", "eve")] + [999]
    client.get("/presence/api/users/", {"ids": "1"})  # ben's own touch: throttled from now on
    redis_calls.reset()
    response = client.get("/presence/api/users/", {"ids": ",".join(map(str, ids))})
    assert response.status_code == 200
    assert redis_calls.by_command() == {"evalsha": 1}
    users = response.json()["users"]
    assert [(u["user"], u["state"]) for u in users] == [
        (str(people["cy"].pk), "dnd"),
        (str(people["ann"].pk), "online"),
        (str(people["eve"].pk), "offline"),
        ("999", "offline"),
    ]
    assert users[0]["message"] == "Focus" and users[1]["device"] == "desktop"
    assert users[2]["device"] == "" and users[2]["last_active"] is None  # invisible: nothing leaks


def test_invisible_users_see_themselves(client, people):
    eve = people["eve"]
    client.force_login(eve)
    response = client.get("/presence/api/users/", {"id": eve.pk})
    assert response.json()["users"][0]["state"] == "invisible"


def test_bad_requests(client, ben):
    assert client.get("/presence/api/users/").status_code == 400
    with override_settings(PRESENCE={"MAX_WATCHED_USERS": 3}):
        assert client.get("/presence/api/users/", {"ids": "1,2,3,4"}).status_code == 400
    assert client.get("/presence/api/online/", {"page": "x"}).status_code == 400
    assert client.post("/presence/api/online/").status_code == 405


def test_a_user_past_their_rate_is_answered_429_and_others_are_not(client, ben, people):
    # A bucket of two requests that refills one every 100 s: the third within it is refused,
    # however slow the machine; another user (the same address) has a bucket of their own.
    rates = {"API_USER_RATE": 0.01, "API_USER_BURST": 2}
    with override_settings(PRESENCE={**settings.PRESENCE, **rates}):
        answers = [client.get("/presence/api/online/") for _ in range(3)]
        assert [r.status_code for r in answers] == [200, 200, 429]
        assert int(answers[-1]["Retry-After"]) >= 1
        client.force_login(people["ann"])
        assert client.get("/presence/api/online/").status_code == 200


def test_the_online_list_pages_and_hides_invisible_users(client, ben, people):
    client.get("/presence/api/online/")  # ben's own request put him online ...
    batcher.flush()  # ... once the process' batch of touches is written
    first = client.get("/presence/api/online/", {"per_page": 2}).json()
    second = client.get("/presence/api/online/", {"per_page": 2, "page": 2}).json()
    assert first["count"] == 3 and first["num_pages"] == 2
    names = [u["username"] for u in first["results"] + second["results"]]
    assert sorted(names) == logins("ann", "ben", "cy")  # each once; eve (invisible) never
    assert {u["state"] for u in first["results"] + second["results"]} == {"online", "dnd"}


def test_room_members(client, ben, people):
    response = client.get("/presence/api/rooms/lobby/")
    assert response.status_code == 200
    body = response.json()
    assert body["room"] == "lobby" and body["count"] == 2
    members = [(m["username"], m["state"]) for m in body["members"]]
    assert members == [(login_name("ann"), "online"), (login_name("cy"), "dnd")]
    assert client.get("/presence/api/rooms/no%20spaces/").status_code == 400


def test_room_members_respect_can_join(client, ben, people, settings):
    with override_settings(
        PRESENCE={**settings.PRESENCE, "CAN_JOIN": "tests.web.test_api.can_join"}
    ):
        assert client.get("/presence/api/rooms/lobby/").status_code == 200
        assert client.get("/presence/api/rooms/staff-room/").status_code == 403


def test_redis_down_is_a_503(client, django_user_model, redis_down):
    client.force_login(create_user("ann"))
    response = client.get("/presence/api/users/", {"ids": "1"})
    assert response.status_code == 503 and response.json()["detail"]


# -- robustness: a 400 with a sentence, never a 500 (issue 41) -----------------------------------
def test_a_deeply_nested_privacy_body_is_a_400(client, ben):
    for body in (b"[" * 100_000, b'{"a":' * 100_000):
        response = client.post("/presence/api/privacy/", body, content_type="application/json")
        assert response.status_code == 400
        assert response.json()["detail"] == "The body is not valid JSON."


@pytest.mark.parametrize(
    "path", ["rooms/caf%C3%A9%E2%82%AC/", "rooms/%E2%82%AC/members/", "rooms/\u20ac\u4e2d/"]
)
def test_a_room_name_beyond_latin_1_under_wsgi_is_a_400_with_a_sentence(client, ben, path):
    response = client.get(f"/presence/api/{path}")  # the test client is WSGI
    assert response.status_code == 400
    assert response.json()["detail"].endswith(".")  # the room rule's own sentence


def test_a_room_name_beyond_latin_1_is_read_under_wsgi_when_the_pattern_admits_it(
    client, ben, settings
):
    with override_settings(PRESENCE={**settings.PRESENCE, "ROOM_NAME_PATTERN": r"^\w+$"}):
        presence.connect("ben-2", ben.pk)
        presence.join("caf\u00e9\u4e2d", "ben-2", ben.pk)
        response = client.get("/presence/api/rooms/caf%C3%A9%E4%B8%AD/")
        assert response.status_code == 200, response.content
        assert response.json()["room"] == "caf\u00e9\u4e2d" and response.json()["count"] == 1
        assert client.get("/presence/api/rooms/caf%FF/").json()["detail"] == (
            "The room name is not valid UTF-8 text."
        )
