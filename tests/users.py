"""Users for tests, whatever the user model: Django's own (tests/settings.py) or the UUID-and-
email one (tests/settings_uuid.py, tests/accounts/). A test names a user ("ann"); these helpers
spell the login as the active model needs it (``ann`` or ``ann@example.com``)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async

from project.demo.users import create_user as _create_user
from project.demo.users import login_name

__all__ = ["acreate_user", "create_user", "login_name", "names"]


def create_user(name: str, **extra: Any) -> Any:
    """A saved user called ``name`` (``password`` and the model's fields in ``extra``)."""
    return _create_user(name, **extra)


async def acreate_user(name: str, **extra: Any) -> Any:
    return await sync_to_async(create_user)(name, **extra)


def names(*names: str) -> list[str]:
    """The logins of ``names``, as ``get_username()`` and the API's ``username`` spell them."""
    return [login_name(name) for name in names]


def json_id(pk: Any) -> int | str:
    """A primary key as a browser sends it in JSON: an int stays one (ints are ids too), a UUID
    becomes its string."""
    if isinstance(pk, str) and pk.isdigit():
        return int(pk)
    return pk if isinstance(pk, int) else str(pk)
