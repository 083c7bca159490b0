"""What the front door accepts: user ids, room names and status fields.

Every entry point (socket, SSE, JSON API, template tags, Python calls) validates through these
functions. They turn Django's values into the store's (a user object into its key, a UUID into
its text) and add the project's own rules (``ROOM_NAME_PATTERN``, ``MAX_ROOM_NAME_LENGTH``,
``MAX_MESSAGE_LENGTH``); each rule the store has too is the store's (``store.inputs``: one
definition, one message), so a name is refused the same way, with the same words, wherever it
arrives. They raise :class:`~presence_app.store.InvalidInput`; the WebSocket answers it with an
``invalid`` error frame, the JSON API with a 400. The way back, from a store id to the user
(:func:`pk_of`, :func:`users_in_order`), is written here too, beside the rule it inverts.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from operator import attrgetter
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db.models import Model

from .. import conf
from ..store import MAX_DEVICE_LENGTH, InvalidInput, is_text
from ..store import inputs as store

#: The longest user id the store keeps (a primary key, a UUID, a username).
MAX_USER_ID_LENGTH = store.MAX_ID_LENGTH
#: The room name of a URL whose bytes are not UTF-8 (the API's paths, the rules' own check).
NOT_UTF8_ROOM = "The room name is not valid UTF-8 text."
#: ``set_status`` states a caller may ask for; "online" is the automatic state.
SET_STATES = {"auto": "auto", "online": "auto", "dnd": "dnd", "invisible": "invisible"}


#: The primary-key types Django's user models use: AutoField and BigAutoField (int), UUIDField,
#: CharField (str). A UUID is spelled as ``str(uuid)`` does: lower case, with hyphens.
PK_TYPES = (str, int, uuid.UUID)


def user_id(value: Any) -> str:
    """A user's id as the store spells it, from a user object, a primary key or an id string;
    InvalidInput for anything else (see :func:`user_key` for the form that never raises)."""
    pk = getattr(value, "pk", value)
    return store.user_id(str(pk) if isinstance(pk, uuid.UUID) else pk)


def optional_user_id(value: Any) -> str | None:
    """:func:`user_id`, or None for no user (None, "", an unsaved user object)."""
    if value is None or value == "" or getattr(value, "pk", value) is None:
        return None
    return user_id(value)


def user_key(value: Any) -> str | None:
    """:func:`optional_user_id` for code that must not raise (templates fail quietly, the
    middleware must serve the page): None for no user and for a value that cannot be an id."""
    try:
        return optional_user_id(value)
    except InvalidInput:
        return None


def pk_of(uid: str) -> Any:
    """The other way: the user model's primary key for a store id, or None when it cannot be
    one (an id of another model's type)."""
    try:
        return get_user_model()._meta.pk.to_python(uid)
    except ValidationError:
        return None


def users_in_order(user_ids: Iterable[str]) -> list[Any]:
    """User objects for store ids, in the same order; ids without a user are dropped."""
    pks = [pk for pk in map(pk_of, user_ids) if pk is not None]
    found = get_user_model()._default_manager.in_bulk(pks)
    return [found[pk] for pk in pks if pk in found]


#: What a device label may hold (``?device=`` on a socket or a stream): it is shown in the admin.
DEVICE_UNSAFE = re.compile(r"[^A-Za-z0-9 ._()/-]")


def device(value: str | None) -> str | None:
    """A device label from what a client sent (phone, desktop ...): its safe characters only,
    at most ``MAX_DEVICE_LENGTH`` of them; None for nothing left."""
    text = DEVICE_UNSAFE.sub("", value or "")[:MAX_DEVICE_LENGTH]
    return text or None


def _keys(values: list[Any]) -> list[Any]:
    """The primary keys of ``values``: for a page of one model's objects, its key field read at
    once (what ``Model.pk`` reads, without a property call an object); a page of strings or
    integers as it is; else each one's ``pk``, or the value."""
    types = set(map(type, values))
    if len(types) == 1:
        cls = types.pop()
        if cls is str or cls is int:  # keys already
            return values
        if issubclass(cls, Model):
            return list(map(attrgetter(cls._meta.pk.attname), values))
    return [getattr(v, "pk", v) for v in values]


def user_ids(values: Any) -> list[str]:
    """Ids of ``values`` (objects, keys or strings) in order, without duplicates (a
    :class:`~presence_app.store.UserIds`: the store reads them without checking them again)."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise InvalidInput("User ids must come as a list.")
    pks = _keys(list(values))
    # a UUID key's text (asked of the page's types, not of each key)
    if any(issubclass(kind, uuid.UUID) for kind in set(map(type, pks))):
        pks = [str(pk) if isinstance(pk, uuid.UUID) else pk for pk in pks]
    return store.user_ids(pks)  # a page of integer keys or of strings: checked at once


def room(value: Any) -> str:
    """A room name the project admits: ``MAX_ROOM_NAME_LENGTH`` and ``ROOM_NAME_PATTERN``."""
    if isinstance(value, bytes):
        try:
            value = value.decode()
        except UnicodeDecodeError:
            raise InvalidInput(NOT_UTF8_ROOM) from None
    if not isinstance(value, str) or not value:
        raise InvalidInput("A room name must be a non-empty string.")
    limit = int(conf.get("MAX_ROOM_NAME_LENGTH"))
    if len(value) > limit:
        raise InvalidInput(f"A room name may be at most {limit} characters long.")
    if not is_text(value):
        store.room(value)  # the store's words for it
    # fullmatch: with re.match a pattern ending in "$" would admit "lobby\n".
    if not re.fullmatch(conf.get("ROOM_NAME_PATTERN"), value):
        raise InvalidInput("The room name does not match the allowed pattern.")
    return store.room(value)  # whatever the pattern admits: a name, no control character


def status_state(value: Any) -> str | None:
    """``set_status``'s state: None keeps it; "online" means "auto"."""
    if value is None:
        return None
    return store.state(SET_STATES.get(value, value) if isinstance(value, str) else value)


def status_text(name: str, value: Any) -> str | None:
    """A status message or emoji: None keeps it, "" clears it."""
    if value is None:
        return None
    if name == "message":
        limit = int(conf.get("MAX_MESSAGE_LENGTH"))
    else:
        limit = store.MAX_EMOJI_LENGTH if name == "emoji" else MAX_DEVICE_LENGTH
    return store.text(value, limit, name)


def expires_in(value: Any) -> float | None:
    """Seconds until a status message clears itself; None (or absent) is never."""
    # 1e999 parses as infinity: "never" is no expiry, which is leaving it out.
    return None if value is None else store.expires_in(value)


class RoomStateTooLarge(InvalidInput):
    """A room state over ``ROOM_STATE_MAX_BYTES`` (a socket answers ``too_large``)."""


def room_state(value: Any) -> str | None:
    """A member's state in a room as the compact JSON the store keeps: a JSON object of at most
    ``ROOM_STATE_MAX_BYTES`` (None: the state is removed)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidInput("A room state must be a JSON object, or null to clear it.")
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"A room state must be JSON ({exc}).") from None
    if not is_text(text):
        raise InvalidInput("A room state must be Unicode text.")
    limit = int(conf.get("ROOM_STATE_MAX_BYTES"))
    if len(text.encode()) > limit:
        raise RoomStateTooLarge(f"A room state may be at most {limit} bytes of JSON.")
    return text
