"""Proposed Python fast paths for the store's two hot loops, drop-in equivalents of:

* ``Planner.heartbeat_many``'s member list: ``[f"{user_id_of(u)}|{conn_id_of(c)}" for c, u in
  pairs]`` validates each pair with two function calls and a regex match (~0.45 us a pair). The
  fast path checks the whole batch at once (C-level ``all``/``min``/``max``/``isprintable`` and
  one regex over the joined conn ids) and falls back to the per-pair checks, which raise the
  precise error, only when something is off.
* ``Planner.get_many``'s finish: ``Presence.from_reply`` per user decodes each field through
  ``_str`` and builds the frozen dataclass by keywords. The fast path decodes the whole reply
  once and calls the constructor positionally.
"""

from __future__ import annotations

import json
import re
from typing import Any

from presence_app.store.plans import conn_id_of, user_id_of
from presence_app.store.types import Presence

_CONN_IDS = re.compile(r"[A-Za-z0-9._!~\-\n]*")  # conn id characters, and the joining newline


def heartbeat_members(pairs: Any) -> list[str]:
    """The "user|conn" lease members of (conn_id, user_id) pairs, validated as the store does."""
    pairs = pairs if isinstance(pairs, list) else list(pairs)
    if not pairs:
        return []
    cids, uids = zip(*pairs, strict=True)
    ok = all(type(u) is str for u in uids) and all(type(c) is str for c in cids)
    if ok:
        joined = "\n".join(cids)
        ok = (
            min(map(len, uids)) >= 1
            and max(map(len, uids)) <= 255
            and "".join(uids).isprintable()
            and min(map(len, cids)) >= 1
            and max(map(len, cids)) <= 128
            and joined.count("\n") == len(cids) - 1
            and _CONN_IDS.fullmatch(joined) is not None
        )
    if not ok:  # the slow path names the culprit (or converts int user ids)
        uids = tuple(user_id_of(u) for u in uids)
        cids = tuple(conn_id_of(c) for c in cids)
    return [f"{u}|{c}" for u, c in zip(uids, cids, strict=True)]


def presences(uids: list[str], reply: list[Any]) -> dict[str, Presence]:
    """``{uid: Presence}`` from one get_many script reply (7 fields per user)."""
    texts = [f.decode() if isinstance(f, bytes) else str(f) for f in reply]
    out: dict[str, Presence] = {}
    loads = json.loads
    for i, uid in enumerate(uids):
        state, seen, active, message, emoji, device, meta = texts[7 * i : 7 * i + 7]
        out[uid] = Presence(
            uid,
            state,  # type: ignore[arg-type]
            float(seen) if seen else None,
            float(active) if active else None,
            message,
            emoji,
            device,
            loads(meta) if meta else {},
        )
    return out


def transitions(flat: list[Any]) -> list[Any]:
    """``Transition.parse_many`` with the reply decoded at once and each distinct ``extra`` JSON
    parsed once (a sweep's 10 k offline transitions mostly share one: no message, no rooms)."""
    from presence_app.store.types import Transition

    texts = [f.decode() if isinstance(f, bytes) else str(f) for f in flat]
    seen: dict[str, tuple[tuple[str, ...], str, str]] = {}
    out = []
    for i in range(0, len(texts), 6):
        kind, user, room, state, at, extra = texts[i : i + 6]
        parsed = seen.get(extra)
        if parsed is None:
            data = json.loads(extra) if extra else {}
            rooms = data.get("rooms") or []  # Lua's cjson encodes an empty list as {}
            parsed = seen[extra] = (
                tuple(rooms) if isinstance(rooms, list) else (),
                data.get("message") or "",
                data.get("emoji") or "",
            )
        rooms_, message, emoji = parsed
        out.append(Transition(kind, user, state, float(at), room or None, rooms_, message, emoji))  # type: ignore[arg-type]
    return out
