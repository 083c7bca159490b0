"""Layout 2's eager derivation of get_many's presences (presence_app/store/types.py before the
derivation cut, commit f177d64), kept so that ``bench/store_reads.py`` measures the cut side by
side with it in one run: every field of every presence parsed and built when the reply comes.

``eager_deriver`` has ``Presence.deriver``'s signature; ``eager()`` swaps it in for the calls
made inside it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import chain, repeat
from typing import Any

from presence_app.store.types import SEP_BYTES, Presence, StoreConfig


def eager_deriver(
    cls: type, viewer: str, reveal_all: bool, config: StoreConfig
) -> Callable[[list[str], list[Any]], dict[str, Presence]]:
    """A function from a get_many reply (the clock, then each user's seen score, hidden
    score, K_UNTIL entry and record: lua/get_many.lua) to ``{user_id: Presence}``, as
    ``viewer`` may see them. The rules are lib.lua's ``until_of``, ``public_state`` and
    ``live_message``; they run here so that Redis does no per-user work for a read."""
    span = max(config.lease_ttl, config.online_window)
    idle_after = config.idle_after
    new = object.__new__

    def build(fields: dict[str, Any]) -> Presence:
        # Without __init__'s eight frozen setattr calls: this runs for every dot of a page.
        p = new(cls)
        p.__dict__.update(fields)
        return p

    def derive(user_ids: list[str], reply: list[Any]) -> dict[str, Presence]:
        now = float(reply[0])
        out = {}
        rows = []
        # per chunk of users (as many as its seen scores): seen scores, hidden ones, ends,
        # records
        first = 0
        for c in range(1, len(reply), 4):
            seen_, hidden_, ends_, records = reply[c : c + 4]
            rows.append(
                zip(
                    user_ids[first : first + len(seen_)],
                    seen_,
                    hidden_ or repeat(None),  # empty while no one hides
                    ends_ or repeat(None),
                    records,
                    strict=False,
                )
            )
            first += len(seen_)
        for uid, seen, hidden, ends, raw in chain.from_iterable(rows):
            if raw is None:
                st = la = ls = lv = msg = emo = dev = mx = meta = b""
            else:
                if isinstance(raw, str):
                    raw = raw.encode()
                # the first nine fields; the rest, unsplit, is for the scripts
                st, la, ls, lv, msg, emo, dev, mx, meta, _ = raw.split(SEP_BYTES, 9)
            if msg or emo or dev:
                message, emoji, device = msg.decode(), emo.decode(), dev.decode()
                if mx and float(mx) < now:
                    message = emoji = ""
            else:
                message = emoji = device = ""
            data = json.loads(meta) if meta else {}
            invisible = st == b"invisible"
            if invisible and not (reveal_all or uid == viewer):
                # Nothing that changes while they hide: no activity, device or status text.
                out[uid] = build(
                    {
                        "user_id": uid,
                        "state": "offline",
                        "last_seen": float(lv) if lv else None,
                        "last_active": None,
                        "message": "",
                        "emoji": "",
                        "device": "",
                        "meta": data,
                    }
                )
                continue
            score = hidden if invisible else seen
            active = float(la) if la else None
            if score and (float(ends) if ends else float(score) + span) >= now:
                last_seen: float | None = now
                if invisible:
                    state = "invisible"
                elif st == b"dnd":
                    state = "dnd"
                elif active is not None and now - active >= idle_after:
                    state = "idle"
                else:
                    state = "online"
            else:
                state = "offline"
                # their last sign of life, when they have not been swept yet
                last_seen = max(float(ls) if ls else 0.0, float(score) if score else 0.0) or None
            out[uid] = build(
                {
                    "user_id": uid,
                    "state": state,
                    "last_seen": last_seen,
                    "last_active": active,
                    "message": message,
                    "emoji": emoji,
                    "device": device,
                    "meta": data,
                }
            )
        return out

    return derive


@contextmanager
def eager() -> Iterator[None]:
    """Presence.deriver is layout 2's eager one inside the block."""
    lazy = Presence.__dict__["deriver"]
    Presence.deriver = classmethod(eager_deriver)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        Presence.deriver = lazy  # type: ignore[method-assign]
