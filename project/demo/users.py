"""The demo's users: printed by `make run` and listed in docs/development.md."""

from __future__ import annotations

from typing import Any

DEMO_PASSWORD = "presence-demo"
DEMO_USERS = ["alice", "bob", "carol", "dave"]
ADMIN = ("admin", "presence-admin")


def login_name(name: str) -> str:
    """What ``name`` logs in with under the project's user model: the name itself, or
    ``name@example.com`` where the model's ``USERNAME_FIELD`` is an email address."""
    from django.contrib.auth import get_user_model
    from django.db import models

    field = get_user_model()._meta.get_field(get_user_model().USERNAME_FIELD)
    return f"{name}@example.com" if isinstance(field, models.EmailField) else name


def create_user(name: str, **extra: Any) -> Any:
    """A user called ``name`` of whatever user model the project has (``create_user`` with the
    model's ``USERNAME_FIELD``); ``extra``: password, is_staff, and the model's other fields."""
    from django.contrib.auth import get_user_model

    User = get_user_model()
    return User._default_manager.create_user(**{User.USERNAME_FIELD: login_name(name)}, **extra)
