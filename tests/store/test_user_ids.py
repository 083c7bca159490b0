"""Users are given as user objects, primary keys or id strings, whatever the user model's primary
key is: an integer, a UUID or a string. Each is spelled one way in the store (``str(pk)``)."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from django.db import models

from presence_app import presence
from presence_app.core import rules
from presence_app.core.rules import user_key
from presence_app.store import InvalidInput

UID = uuid.UUID("7c9e6679-7425-40de-944b-e07fc1f90ae7")


@pytest.mark.parametrize(
    ("given", "spelled"),
    [
        (7, "7"),
        ("7", "7"),
        (UID, str(UID)),
        (str(UID), str(UID)),
        ("ann@example.com", "ann@example.com"),
        (SimpleNamespace(pk=UID), str(UID)),
        (SimpleNamespace(pk=7), "7"),
        (SimpleNamespace(pk="ann"), "ann"),
    ],
)
def test_every_primary_key_type_is_one_user_id(given, spelled):
    assert rules.user_id(given) == spelled
    assert user_key(given) == spelled


@pytest.mark.parametrize("bad", [True, 1.5, None, b"7", {"id": 7}, [7], SimpleNamespace(pk=None)])
def test_what_cannot_be_a_user_id_is_refused(bad):
    with pytest.raises(InvalidInput):
        rules.user_id(bad)
    assert user_key(bad) is None  # templates fail quietly


@pytest.mark.django_db
def test_a_uuid_user_goes_through_every_front_door_call(redis_client):
    """Failed on 89165fe: "a user id is a string or an integer" from every call below."""
    user = SimpleNamespace(pk=UID)
    presence.connect("c-1", user)
    presence.join("lobby", "c-1", user)
    presence.set_status(user, "dnd", message="Focus")
    assert presence.get(user).state == "dnd"
    now = presence.get(user).last_seen  # a live connection reads as seen now
    assert presence.get(UID, now=now) == presence.get(str(UID), now=now)
    assert set(presence.get_many([user, UID])) == {str(UID)}
    assert presence.room_members("lobby") == [str(UID)]
    presence.leave("lobby", "c-1", user)
    presence.disconnect("c-1", user)


def test_a_page_of_integer_keys_is_checked_at_once_as_key_by_key():
    """rules.user_ids' path for a list of integer keys or strings answers as the key-by-key one:
    ids in order without duplicates; a bool, an over-long number, an empty, over-long or
    unprintable string refused."""
    assert rules.user_ids([3, 1, 3, 2]) == ["3", "1", "2"]
    assert rules.user_ids([]) == []
    with pytest.raises(InvalidInput):
        rules.user_ids([1, True])
    with pytest.raises(InvalidInput):
        rules.user_ids([1, 10**300])
    assert rules.user_ids(["b", "a", "b"]) == ["b", "a"]  # a page of strings, the same way
    for bad in (["a", ""], ["a", "x" * 256], ["a", "tab\there"]):
        with pytest.raises(InvalidInput):
            rules.user_ids(bad)


def test_a_page_of_user_objects_reads_their_keys_as_pk_does(django_user_model):
    """One model's objects have their key field read at once; a mixed list (objects, keys,
    strings) goes key by key; both say what ``.pk`` says."""
    field = django_user_model.USERNAME_FIELD
    users = [django_user_model(**{field: f"u{i}"}) for i in range(3)]
    for i, user in enumerate(users):  # unsaved: any key the model's type takes
        user.pk = uuid.uuid4() if isinstance(user._meta.pk, models.UUIDField) else 10 + i
    assert rules.user_ids(users) == [str(u.pk) for u in users]
    assert rules.user_ids([users[0], users[1].pk, str(users[2].pk)]) == [str(u.pk) for u in users]
    with pytest.raises(InvalidInput):
        rules.user_ids([users[0], None])
