"""``{% room_members r %}`` alone: the live list of a room's members (each member's dot and
name, the viewer left out with ``others=True``), and the endpoint that names the members who
join later (``presence/api/rooms/<room>/names/``): never a member the viewer may not see."""

import pytest
from django.conf import settings
from django.test import override_settings

from presence_app import presence

from ..users import create_user
from .test_templatetags import dot, render

pytestmark = pytest.mark.django_db


def can_join(user, room):
    return not room.startswith("staff")


@pytest.fixture
def lobby(django_user_model, redis_client):
    """In the lobby, in this order: ann, cy (do not disturb, a full name), eve (invisible);
    di is online elsewhere."""
    users = {n: create_user(n) for n in ("ann", "cy", "di", "eve")}
    users["cy"].first_name, users["cy"].last_name = "Cy", "<Young>"
    users["cy"].save()
    for name in ("ann", "cy", "eve"):
        presence.connect(f"{name}-1", users[name].pk)
        presence.join("lobby", f"{name}-1", users[name].pk)
    presence.set_status(users["cy"].pk, "dnd")
    presence.set_status(users["eve"].pk, "invisible")
    presence.touch(users["di"].pk)
    return users


def row(user, state, label, name):
    return (
        f'<li class="presence-room-member" data-presence-room-member="{user.pk}">'
        f'{dot(user.pk, state, label)} <span class="presence-room-member-name">{name}</span></li>'
    )


def test_alone_the_tag_renders_the_live_list_with_names_and_dots(lobby):
    ann, cy = lobby["ann"], lobby["cy"]
    names_url = "/presence/api/rooms/lobby/names/"
    html = render('{% room_members "lobby" %}', viewer=ann)
    # eve is invisible: not in the room for ann. cy's full name, escaped once.
    assert html == (
        f'<ul class="presence-room-members" data-presence-room-members="lobby" '
        f'data-presence-names-url="{names_url}">'
        f"{row(ann, 'online', 'Online', ann.get_username())}"
        f"{row(cy, 'dnd', 'Do not disturb', 'Cy &lt;Young&gt;')}</ul>"
    )

    # Everyone but me: ann is not listed, and the list says so for presence.js.
    html = render('{% room_members "lobby" others=True %}', viewer=ann)
    assert html == (
        f'<ul class="presence-room-members" data-presence-room-members="lobby" '
        f'data-presence-names-url="{names_url}" data-presence-others>'
        f"{row(cy, 'dnd', 'Do not disturb', 'Cy &lt;Young&gt;')}</ul>"
    )

    # With "as": the users, as before; others=True counts everyone but the viewer.
    html = render(
        '{% room_members "lobby" as all %}{% room_members "lobby" others=True as rest %}'
        "{{ all|length }} {{ rest|length }} {% for u in rest %}{{ u.get_full_name }}{% endfor %}",
        viewer=ann,
    )
    assert html == "2 1 Cy &lt;Young&gt;"

    # Eve sees herself, invisible, on her own page; others=True leaves her out.
    html = render(
        '{% room_members "lobby" others=True as rest %}{{ rest|length }}', viewer=lobby["eve"]
    )
    assert html == "2"


def test_a_count_only_room_and_a_room_the_viewer_may_not_join_show_no_members(lobby):
    ann = lobby["ann"]
    count_only = {**settings.PRESENCE, "COUNT_ONLY_ROOMS": [r"lobby"]}
    with override_settings(PRESENCE=count_only):
        assert render('{% room_members "lobby" %}', viewer=ann) == ""
    with override_settings(PRESENCE={**settings.PRESENCE, "CAN_JOIN": f"{__name__}.can_join"}):
        presence.join("staff-room", "cy-1", lobby["cy"].pk)
        html = render('{% room_members "staff-room" %}', viewer=ann)
        assert "data-presence-room-member=" not in html
        assert 'data-presence-room-members="staff-room"' in html


def names(client, room, *users):
    ids = ",".join(str(u.pk) for u in users)
    return client.get(f"/presence/api/rooms/{room}/names/", {"ids": ids})


def test_the_names_endpoint_names_only_whom_the_viewer_sees_in_the_room(client, lobby):
    ann, cy, di, eve = (lobby[n] for n in ("ann", "cy", "di", "eve"))
    assert names(client, "lobby", cy).status_code == 401  # signed in only
    client.force_login(ann)
    reply = names(client, "lobby", ann, cy, di, eve)
    assert reply.status_code == 200
    # eve is invisible (in the room, but not for ann), di is not in the room.
    assert reply.json() == {
        "room": "lobby",
        "names": {str(ann.pk): ann.get_username(), str(cy.pk): "Cy <Young>"},
    }
    # Cy, once he left, is named to nobody; eve, invisible, to nobody either, herself included:
    # the names are of the room's list as the viewer's page shows it, and hers leaves her out.
    presence.leave("lobby", "cy-1", cy.pk)
    assert names(client, "lobby", ann, cy, eve).json()["names"] == {str(ann.pk): ann.get_username()}
    client.force_login(eve)
    assert names(client, "lobby", cy, eve).json()["names"] == {}
    assert str(eve.pk) not in presence.room_members("lobby", viewer=eve)
    # Nobody of a count-only room, nobody of a room CAN_JOIN keeps the viewer out of.
    with override_settings(PRESENCE={**settings.PRESENCE, "COUNT_ONLY_ROOMS": [r"lobby"]}):
        assert names(client, "lobby", ann, eve).json()["names"] == {}
    with override_settings(PRESENCE={**settings.PRESENCE, "CAN_JOIN": f"{__name__}.can_join"}):
        assert names(client, "staff-room", ann).status_code == 403
    assert names(client, "lobby").status_code == 400  # no ids


def test_with_redis_down_the_list_renders_empty(redis_down, django_user_model):
    html = render('{% room_members "lobby" others=True %}', viewer=create_user("ann"))
    assert html == (
        '<ul class="presence-room-members" data-presence-room-members="lobby" '
        'data-presence-names-url="/presence/api/rooms/lobby/names/" data-presence-others></ul>'
    )
