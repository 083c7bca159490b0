"""What the store accepts: the one definition of each input rule, with its one message.

The store stands alone (a project may call it without Django), so it checks what it is given.
The front door's rules (``presence_app.core.rules``) turn Django's values into these (a user
object into its key, a project's room pattern and length) and leave the rest to this module:
a name is refused with the same words wherever it arrives. A page the front door checked once
comes as :class:`UserIds` and is not checked again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from .keys import CONN_SEP
from .types import CONTROL_CHARACTERS, InvalidInput, is_text

#: The longest user id the store keeps (a primary key, a UUID, a username).
MAX_ID_LENGTH = 255
#: The longest room name the store keeps (a project may allow fewer: MAX_ROOM_NAME_LENGTH).
MAX_ROOM_LENGTH = 255
MAX_EMOJI_LENGTH = 32
#: A connection's id: made by the process (``secrets``), never by a client.
CONN_ID_RE = re.compile(r"[A-Za-z0-9._!~-]{1,128}")
#: The states ``set_status`` stores ("online" is the front door's word for "auto").
STATES = ("auto", "dnd", "invisible")

ID_TYPE = "A user id is a string, an integer or a UUID."
ID_TEXT = f"A user id is 1 to {MAX_ID_LENGTH} printable characters."
#: Integer keys whose decimal text fits MAX_ID_LENGTH (a minus sign included).
_INT_BOUND = 10 ** (MAX_ID_LENGTH - 1)


def user_id(value: Any) -> str:
    """A user id as the store spells it: a string, or an integer key as its text."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInput(ID_TYPE)
    text = str(value)
    if not 0 < len(text) <= MAX_ID_LENGTH or not text.isprintable():
        raise InvalidInput(ID_TEXT)
    return text


class UserIds(list):
    """User ids checked as :func:`user_ids` checks them, without duplicates: a page checked
    once (by the front door), which the store does not check again."""


def user_ids(values: Iterable[Any]) -> UserIds:
    """:func:`user_id` of many, in order, without duplicates. A page of integer keys or of
    strings (the usual) is checked at once, at C speed; anything else, or a page with a bad id
    in it, one by one (the message names what is wrong)."""
    if type(values) is UserIds:
        return values
    ids = list(values)
    kinds = set(map(type, ids))
    if kinds == {int} and -_INT_BOUND < min(ids) and max(ids) < _INT_BOUND:  # fit as text
        return UserIds(dict.fromkeys(map(str, ids)))
    if (
        kinds == {str}
        and min(map(len, ids)) > 0
        and max(map(len, ids)) <= MAX_ID_LENGTH
        and "".join(ids).isprintable()
    ):
        return UserIds(dict.fromkeys(ids))
    return UserIds(dict.fromkeys(map(user_id, ids)))


def conn_id(value: Any) -> str:
    if not isinstance(value, str) or not CONN_ID_RE.fullmatch(value):
        raise InvalidInput("A connection id is 1 to 128 characters of A-Z a-z 0-9 . _ ! ~ -.")
    return value


_CONN_IDS_JOINED = re.compile(r"[A-Za-z0-9._!~\-\n]*")  # conn id characters and the joining "\n"


def lease_members(pairs: Iterable[tuple[Any, Any]]) -> list[str]:
    """The "user|conn" members of (conn_id, user_id) pairs, checked as :func:`user_id` and
    :func:`conn_id` would, but a whole batch at once (the coalescer's hot path): C-level checks
    over all ids, and the per-pair checks (which name the culprit) only when something is off."""
    pairs = list(pairs)
    if not pairs:
        return []
    cids, uids = zip(*pairs, strict=True)
    ok = all(type(u) is str for u in uids) and all(type(c) is str for c in cids)
    if ok:
        joined = "\n".join(cids)
        ok = (
            0 < min(map(len, uids))
            and max(map(len, uids)) <= MAX_ID_LENGTH
            and "".join(uids).isprintable()
            and 0 < min(map(len, cids))
            and max(map(len, cids)) <= 128
            and joined.count("\n") == len(cids) - 1
            and _CONN_IDS_JOINED.fullmatch(joined) is not None
        )
    if not ok:
        uids = tuple(user_id(u) for u in uids)
        cids = tuple(conn_id(c) for c in cids)
    return [f"{u}{CONN_SEP}{c}" for u, c in zip(uids, cids, strict=True)]


def room(value: Any) -> str:
    """A room name: Unicode text of at most MAX_ROOM_LENGTH characters, none of them control
    characters (a room is a name, and the scripts' replies split on two of them)."""
    if not isinstance(value, str) or not value:
        raise InvalidInput("A room name must be a non-empty string.")
    if len(value) > MAX_ROOM_LENGTH:
        raise InvalidInput(f"A room name may be at most {MAX_ROOM_LENGTH} characters long.")
    if not is_text(value):
        raise InvalidInput("The room name is not valid Unicode text.")
    if CONTROL_CHARACTERS.search(value):
        raise InvalidInput("The room name must not contain control characters.")
    return value


def text(value: Any, limit: int, what: str) -> str:
    """A status message, an emoji or a device label: Unicode text of at most ``limit``
    characters, no control character but the tab."""
    if not isinstance(value, str):
        raise InvalidInput(f'"{what}" must be a string.')
    if len(value) > limit:
        raise InvalidInput(f'"{what}" may be at most {limit} characters long.')
    if any(ord(c) < 32 and c != "\t" for c in value):
        raise InvalidInput(f'"{what}" must not contain control characters.')
    if not is_text(value):
        raise InvalidInput(f'"{what}" must be Unicode text.')
    return value


def state(value: Any) -> str:
    if value not in STATES:
        raise InvalidInput('"state" must be one of online, auto, dnd and invisible.')
    return value


def window(value: float | None) -> str:
    """The online script's window argument: '' for "present now"."""
    if value is None:
        return ""
    if not (isinstance(value, (int, float)) and not isinstance(value, bool)) or not (
        0 <= value < math.inf
    ):
        raise InvalidInput('"window" must be a finite number of seconds, not negative.')
    return repr(float(value))


def expires_in(value: Any) -> float:
    """Seconds until a status text clears itself: positive and finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidInput('"expires_in" must be a positive number of seconds.')
    if not math.isfinite(value):
        raise InvalidInput('"expires_in" must be a positive number of seconds.')
    return float(value)
