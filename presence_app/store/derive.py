"""A get_many reply (lua/get_many.lua) to presences: the rules of who is online run here, in
Python, so that Redis does no per-user work for a read."""

from __future__ import annotations

from collections.abc import Callable
from itertools import repeat
from typing import Any

from .types import ONLINE_STATES, SEP, Presence, StoreConfig

#: Separates the records of a get_many reply (lua/get_many.lua).
RS = "\x1e"

# get_many.lua's codes: a user connected and within their lease, with no record (online) or
# with one; an HTTP-only user within their window, with no record (online)
PLAIN, LIVE, WEB = ord("1"), ord("2"), ord("3")
#: get_many.lua's web scores of the "3"s, when they come as integers: each times 2^22, a whole
#: number (exact for every score from 2^30 s on: a double's step there is 2^-22 or more)
WEB_SCALE = 4194304.0


def deriver(
    viewer: str, reveal_all: bool, config: StoreConfig
) -> Callable[[list[str], list[Any]], dict[str, Presence]]:
    """A get_many reply (lua/get_many.lua) to ``{user_id: Presence}``. The script
    tells which users are connected and within their lease (no K_UNTIL end), and sends no score
    for them, and nothing at all for those of them with no record (online: the most common
    user); which users are HTTP-only within their window with no record, and sends their web
    score alone (online, their last activity); the others' scores and records come as they
    are. A connected user's
    presence runs LEASE_TTL after their score unless K_UNTIL says otherwise (a grace's sooner
    end, or a long ONLINE_WINDOW's later one); idle is the record's flag (announced by the
    process that saw the activity stop); an offline user's last seen is the latest of their
    record's, K_LAST's and their score not swept yet. The last activity of a connected user
    whose record has none is their registry field's, when the read asked for it (the reply's
    last part)."""
    new = object.__new__
    span, window = float(config.lease_ttl), float(config.online_window)

    def derive(user_ids: list[str], reply: list[Any]) -> dict[str, Presence]:
        clock, codes, records, webs, seen_, ends_, hidden_, web_, last_, *registry = reply
        now = float(clock)
        # the records of the "2"s and "0"s joined by \x1e ('' for none), one decode for all;
        # the web scores of the "3"s (see WEB_SCALE)
        if isinstance(records, bytes):
            records = records.decode()
        records = records.split(RS)  # a lone record of '' (a "0" with none) too
        if webs:  # each web score x 2^22, a whole number (exact), or one text of each
            if type(webs) is list:
                webs = [n / WEB_SCALE for n in webs]
            else:
                webs = list(map(float, webs.split()))
        # the script coded each user: "1" connected and within their lease with no record (it
        # sent nothing else: online), "2" the same with a record (it sent that), "3" HTTP-only
        # within their window with no record (it sent their web score), "0" the others (it
        # sent, in their order, their record, seen score and end, and for those with no seen
        # score, in their order, a hidden, a web and a last score)
        records_, webs_ = iter(records), iter(webs)
        rest = zip(seen_, ends_ or repeat(None), strict=False)
        others = zip(
            hidden_ or repeat(None), web_ or repeat(None), last_ or repeat(None), strict=False
        )
        out: dict[str, Presence] = {}
        # Each presence gets only the fields that differ from the class' defaults ("", None,
        # "offline"); ``meta`` is made when first read (Presence.meta).
        codes = codes.encode() if isinstance(codes, str) else codes
        for uid, code in zip(user_ids, codes, strict=True):
            out[uid] = p = new(Presence)
            d = p.__dict__
            if code == PLAIN:  # most users: online, three fields of their own
                d["user_id"], d["state"], d["last_seen"] = uid, "online", now
                continue
            if code == WEB:  # HTTP only: online, active at their last request
                d["user_id"], d["state"], d["last_seen"] = uid, "online", now
                d["last_active"] = next(webs_)
                continue
            raw = next(records_) or None
            if code == LIVE:  # connected and within their lease, with a record
                st, la, _, _, msg, emo, dev, mx, meta, _, idle, _ = raw.split(SEP, 11)
                if not (st or meta):  # a status and no more: its fields as they are
                    d["user_id"], d["last_seen"] = uid, now
                    d["state"] = "idle" if idle == "1" else "online"
                    if la:
                        d["last_active"] = float(la)
                    if not (mx and float(mx) < now):  # a status text that has not expired
                        if msg:
                            d["message"] = msg
                        if emo:
                            d["emoji"] = emo
                    if dev:
                        d["device"] = dev
                    continue
                seen, hidden, gone, live = None, None, None, 1
            else:
                seen, end = next(rest)
                if seen is not None:  # connected: live within SPAN, unless an end says otherwise
                    seen, hidden, gone = float(seen), None, None
                    live = 1 if (seen + span if end is None else float(end)) >= now else 0
                else:
                    hidden, web, gone = next(others)
                    if hidden is not None:  # connected and invisible
                        hidden = float(hidden)
                        live = 1 if (hidden + span if end is None else float(end)) >= now else 0
                        gone = None
                    elif web is not None:  # HTTP only: live within ONLINE_WINDOW of their request
                        gone = float(web)
                        live = 2 if gone + window >= now else 0
                    else:
                        live = 0
                        gone = float(gone) if gone is not None else None
            if raw is None:  # no record: a plain user (or unknown)
                d["user_id"] = uid
                if live:  # an HTTP-only user (2) was active at their last request
                    d["state"], d["last_seen"] = "online", now
                    if live == 2:
                        d["last_active"] = gone
                else:
                    d["last_seen"] = max(gone or 0.0, seen or 0.0) or None
                continue
            st, la, ls, lv, msg, emo, dev, mx, meta, _, idle, _ = raw.split(SEP, 11)
            d["user_id"] = uid
            if live == 1 and not (st or mx or meta):  # present, a status text and no more
                d["state"], d["last_seen"] = "idle" if idle == "1" else "online", now
                if la:
                    d["last_active"] = float(la)
                d["message"], d["emoji"], d["device"] = msg, emo, dev
                continue
            if st == "invisible" and not (reveal_all or uid == viewer):  # to others: offline
                d["last_seen"] = float(lv) if lv else None
                continue
            if not live:
                score = hidden if st == "invisible" else seen
                d["last_seen"] = max(float(ls) if ls else 0.0, gone or 0.0, score or 0.0) or None
            else:
                d["last_seen"] = now
                if st == "invisible" or st == "dnd":
                    d["state"] = st
                else:
                    d["state"] = "idle" if idle == "1" else "online"
            if la or live == 2:
                d["last_active"] = float(la) if la else gone
            if not (mx and float(mx) < now):  # a status text that has not expired
                d["message"], d["emoji"] = msg, emo
            d["device"] = dev
            if meta:  # parsed when first read (Presence.meta)
                d["_record"] = raw.encode()
        if registry:
            with_activity(out, user_ids, registry[0])
        return out

    return derive


def with_activity(found: dict[str, Presence], user_ids: list[str], fields: list[Any]) -> None:
    """Sets the last activity of the connected users whose record holds none (a plain user's is
    in their registry field, ``process \x1f conn \x1f last activity [\x1f window end]``). An
    HTTP-only user's is their request, set already; an offline user shows none."""
    for uid, field in zip(user_ids, fields, strict=True):
        d = found[uid].__dict__
        if field and "last_active" not in d and d.get("state") in ONLINE_STATES:
            active = (field.decode() if isinstance(field, bytes) else field).split(SEP)[2]
            if active:
                d["last_active"] = float(active)
