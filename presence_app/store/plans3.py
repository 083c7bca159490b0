"""Layout 3's plans (docs/store-layout-3.md), the store's default layout.

``Store(client, config)`` uses them (``layout=2``: plans.py's). Built:
``connect``, ``heartbeat_many`` (and ``heartbeat``), ``disconnect``, ``get_many`` (and ``get``),
``online``, ``online_count``, ``sweep``, ``set_status``, ``join``, ``leave``,
``room_members``, ``user_rooms``, ``state_counts``, ``touch``/``touch_many`` (the ``web``
index), ``activity`` and ``idle`` (new: the process that saw a connection's activity stop calls
it), live room state (``set_room_states``, ``room_states``), ``forget`` and ``export``, the
upgrade from layout 2, ``ONLINE_WINDOW > LEASE_TTL`` (a later end in K_UNTIL).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any

from .keys import KeySpace, registry_bucket
from .plans import Call, Plan, Planner, unique_user_ids, user_id_of
from .scripts import NAMES_3
from .types import ONLINE_STATES, SEP, Presence, PresenceError, StoreConfig

LAYOUT_3 = 3
# get_many.lua's codes: a user connected and within their lease, with no record (online) or
# with one
PLAIN, LIVE = ord("1"), ord("2")
READ_CHUNK = 1000  # ids a get_many script call reads (Lua's unpack takes a few thousand)


def json_array(ids: list[str]) -> str:
    """Checked ids as a JSON array, for a script's ``cjson.decode``. They are printable, so
    only a quote or a backslash needs escaping, which json.dumps does (a join is ~8x faster)."""
    text = '","'.join(ids)
    if "\\" in text or text.count('"') != 2 * len(ids) - 2:
        return json.dumps(ids, ensure_ascii=False)
    return f'["{text}"]'


def deriver3(
    viewer: str, reveal_all: bool, config: StoreConfig
) -> Callable[[list[str], list[Any]], dict[str, Presence]]:
    """Layout 3's get_many reply (lua3/get_many.lua) to ``{user_id: Presence}``. The script
    tells which users are connected and within their lease (no K_UNTIL end), and sends no score
    for them, and nothing at all for those of them with no record (online: the most common
    user); the others' scores and records come as they are. A connected user's
    presence runs LEASE_TTL after their score unless K_UNTIL says otherwise (a grace's sooner
    end, or a long ONLINE_WINDOW's later one); idle is the record's flag (announced by the
    process that saw the activity stop); an offline user's last seen is the latest of their
    record's, K_LAST's and their score not swept yet. The last activity of a connected user
    whose record has none is their registry field's, when the read asked for it (the reply's
    last part)."""
    new = object.__new__
    span, window = float(config.lease_ttl), float(config.online_window)

    def derive(user_ids: list[str], reply: list[Any]) -> dict[str, Presence]:
        clock, codes, records, seen_, ends_, hidden_, web_, last_, *registry = reply
        now = float(clock)
        # the script coded each user: "1" connected and within their lease with no record (it
        # sent nothing else: online), "2" the same with a record (it sent that), "0" the others
        # (it sent, in their order, their record, seen score and end, and for those with no
        # seen score, in their order, a hidden, a web and a last score)
        records_ = iter(records)
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
            raw = next(records_)
            if code == LIVE:  # connected and within their lease, with a record
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
            if isinstance(raw, bytes):  # one decode a record, not one a field
                raw = raw.decode()
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


class Planner3(Planner):
    """Layout 3's plans for one configuration and one process (``process``: this process's id,
    random by default; it names the process's lease and its connections)."""

    def __init__(self, config: StoreConfig, process: str | None = None) -> None:
        super().__init__(config)
        self.keys = KeySpace(config.prefix, config.shards, layout=LAYOUT_3)
        self.process = process or secrets.token_hex(4)

    def call(self, script: str, tag: str, now: float | None, *args: Any) -> Call:
        if script not in NAMES_3:  # layout 1's upgrade: not for layout 3
            raise PresenceError(f"{script} is not built for store layout 3")
        keys = (
            KeySpace.seen(tag),
            KeySpace.hidden(tag),
            KeySpace.until(tag),
            KeySpace.procs(tag),
            KeySpace.last(tag),
        )
        head = self.head(tag, now) + (self.config.registry_buckets, self.process)
        return Call(f"3/{script}", keys, head + args)

    def heartbeat_many(self, pairs: Iterable[tuple[str, Any]], now: float | None) -> Plan:
        """As layout 2's, and every shard gets a call, members or not: a batch is also the
        process's keepalive, and its lease lives in every shard it may hold connections in."""
        plan = super().heartbeat_many(pairs, now)
        called = {call.args[0] for call in plan.calls}
        keepalive = [
            self.call("heartbeat", tag, now) for tag in self.keys.all_tags() if tag not in called
        ]
        return Plan(plan.calls + keepalive, plan.finish)

    def idle(self, user_id: Any, now: float | None) -> Plan:
        return self.transitions("idle", user_id, now)

    def online(
        self,
        window: float | None,
        offset: int,
        limit: int | None,
        include_invisible: bool,
        now: float | None,
    ) -> Plan:
        # the connected ("0") and the HTTP-only ("2") of each shard, and the invisible ("1")
        plan = super().online(window, offset, limit, include_invisible, now)
        calls = [
            self.call("online", tag, now, "list", index, *plan.calls[0].args[-2:])
            for tag in self.keys.all_tags()
            for index in (["0", "2", "1"] if include_invisible else ["0", "2"])
        ]
        return Plan(calls, plan.finish)

    def online_count(self, window: float | None, now: float | None) -> Plan:
        plan = super().online_count(window, now)
        calls = [
            self.call("online", tag, now, "count", index, plan.calls[0].args[-1])
            for tag in self.keys.all_tags()
            for index in ("0", "2")
        ]
        return Plan(calls, plan.finish)

    def export(self, user_id: Any) -> Plan:
        """As layout 2's, from layout 3's keys: the indexes it lists users in and the registry
        field of a plain user's one connection."""
        uid = user_id_of(user_id)
        tag = self.keys.tag_for_user(uid)
        names = ("seen", "hidden", "web", "until", "last", "graces", "rexp")
        bucket = registry_bucket(uid, self.config.registry_buckets)
        field = Call("", (), ("HGET", KeySpace.registry(tag, bucket), uid))
        calls = [Call("", (), ("HGET", KeySpace.records(tag), uid)), field]
        calls += [Call("", (), ("ZSCORE", f"{tag}:{name}", uid)) for name in names]
        record_of = super().export(uid).finish

        def finish(replies: list[Any]) -> dict[str, Any]:
            raw, registry, *scores = replies
            data = record_of([raw, None, None, None, None])
            data["indexes"] = {n: float(v) for n, v in zip(names, scores, strict=True) if v}
            if registry:  # "process \x1f conn \x1f last activity"
                conn = (registry.decode() if isinstance(registry, bytes) else registry).split(
                    "\x1f"
                )[1]
                data["connections"] = sorted({*data["connections"], conn})
            return data

        return Plan(calls, finish)

    def user_rooms(self, user_ids: Iterable[Any]) -> Plan:
        """The rooms of the users' connections, from their records (a plain user has none)."""
        uids = unique_user_ids(user_ids)
        calls = [
            Call("", (), ("HGET", KeySpace.records(self.keys.tag_for_user(u)), u)) for u in uids
        ]

        def rooms(raw: Any) -> list[str]:
            if not raw:
                return []
            fields = (raw.decode() if isinstance(raw, bytes) else raw).split("\x1f")
            conns = json.loads(fields[11]) if fields[11] else {}
            # an entry is [process, room, ...]; a closed one's process is "~<end of its grace>"
            return sorted({r for e in conns.values() if isinstance(e, list) for r in e[1:]})

        return Plan(
            calls, lambda replies: {u: rooms(r) for u, r in zip(uids, replies, strict=True)}
        )

    def get_many(
        self,
        user_ids: Iterable[Any],
        viewer: Any,
        reveal_all: bool,
        now: float | None,
        activity: bool = False,
    ) -> Plan:
        """One short script call a shard (per 1,000 ids: Lua's unpack has a limit), all in one
        round trip; the derivation is Python's. ``activity``: the script also reads each
        user's registry field, for a connected plain user's last activity (an HGET a user)."""
        uids = unique_user_ids(user_ids)
        viewer_id = "" if viewer is None else user_id_of(viewer)
        chunks = [
            (tag, ids[i : i + READ_CHUNK])
            for tag, ids in self.by_shard(uids).items()
            for i in range(0, len(ids), READ_CHUNK)
        ]
        calls = [
            self.call("get_many", tag, now, *self.read_args(ids, activity)) for tag, ids in chunks
        ]
        derive = deriver3(viewer_id, reveal_all, self.config)

        def finish(replies: list[Any]) -> dict[str, Presence]:
            if len(chunks) == 1:  # one shard's ids, in their order
                return derive(chunks[0][1], replies[0])
            found: dict[str, Presence] = {}
            for (_, ids), reply in zip(chunks, replies, strict=True):
                found.update(derive(ids, reply))
            return {uid: found[uid] for uid in uids}

        return Plan(calls, finish)

    def read_args(self, ids: list[str], activity: bool) -> tuple[str, ...]:
        """get_many.lua's arguments: the ids, and with ``activity`` their registry buckets."""
        if not activity:
            return (json_array(ids),)
        buckets = [registry_bucket(uid, self.config.registry_buckets) for uid in ids]
        return json_array(ids), json.dumps(buckets)
