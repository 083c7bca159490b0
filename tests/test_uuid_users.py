"""The run under tests/settings_uuid.py (`nox -s uuid_users`) is really on the UUID-and-email
user model, in this process and in the servers it starts; under tests/settings.py, on Django's
own. So the other tests of that run prove what they claim: every path on a UUID primary key."""

from __future__ import annotations

import os
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.db import models

from presence_app import presence

from .servers import Database
from .users import create_user, login_name

UUID_RUN = os.environ.get("PRESENCE_TEST_USERS") == "uuid"


def test_the_active_user_model_is_the_one_the_settings_name():
    User = get_user_model()
    if UUID_RUN:
        assert User._meta.label == "accounts.User" and User.USERNAME_FIELD == "email"
        assert isinstance(User._meta.pk, models.UUIDField)
        assert login_name("ann") == "ann@example.com"
    else:
        assert User._meta.label == "auth.User" and login_name("ann") == "ann"


@pytest.mark.django_db
def test_a_user_of_the_active_model_is_one_user_id_everywhere(redis_client):
    ann = create_user("ann", password="x")
    assert ann.get_username() == login_name("ann")
    presence.touch(ann)
    assert presence.get(ann.pk).user_id == presence.get(ann).user_id == str(ann.pk)
    if UUID_RUN:
        assert isinstance(ann.pk, uuid.UUID) and presence.get(str(ann.pk)).state == "online"


def test_the_servers_a_run_starts_have_the_same_user_model(tmp_path, settings):
    db = Database(tmp_path / "db.sqlite3", env={"REDIS_URL": settings.REDIS_URL}).migrate()
    ann = db.users(["ann"])["ann"]
    if UUID_RUN:
        assert str(uuid.UUID(ann.id)) == ann.id
    else:
        assert ann.id.isdigit()
