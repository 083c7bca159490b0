"""What each store operation sends and how its replies read, shared by the sync and async faces
(the key layout: docs/store-layout.md).

An operation is a :class:`Plan`: the script calls to make (one per shard it touches, sent together
in one round trip) and a function that turns their replies into the result. The two faces only
differ in how they send the calls, so they cannot drift apart.
"""

from __future__ import annotations

import heapq
import json
import math
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from . import inputs
from .derive import deriver
from .keys import CONN_SEP, KeySpace, registry_bucket, shard_of
from .types import (
    MAX_DEVICE_LENGTH,
    RECORD_FIELDS,
    SEP,
    InvalidInput,
    Presence,
    StateCounts,
    StoreConfig,
    Transition,
    _str,
)

_UNSET: Any = object()


@dataclass(frozen=True)
class Call:
    """A script call (``script`` names it) or, with ``script`` empty, a plain command in args."""

    script: str
    keys: tuple[str, ...]
    args: tuple[Any, ...]

    @property
    def routing_key(self) -> str:
        """The key that decides the Cluster node: every key of a call shares its hash tag."""
        return self.keys[0] if self.keys else self.args[1]


@dataclass(frozen=True)
class Plan:
    calls: list[Call]
    finish: Callable[[list[Any]], Any]


def _flat_transitions(replies: list[Any]) -> list[Transition]:
    out: list[Transition] = []
    for reply in replies:
        out.extend(Transition.parse_many(reply))
    return out


READ_CHUNK = 1000  # ids a get_many script call reads (Lua's unpack takes a few thousand)


def json_array(ids: list[str]) -> str:
    """Checked ids as a JSON array, for a script's ``cjson.decode``. They are printable, so
    only a quote or a backslash needs escaping, which json.dumps does (a join is ~8x faster)."""
    text = '","'.join(ids)
    if "\\" in text or text.count('"') != 2 * len(ids) - 2:
        return json.dumps(ids, ensure_ascii=False)
    return f'["{text}"]'


def _record(raw: Any) -> dict[str, str]:
    """A user's record (lib.lua's FIELDS, joined by SEP) as {field: value}, empty ones left out."""
    text = _str(raw) if raw else ""
    return {k: v for k, v in zip(RECORD_FIELDS, text.split(SEP) if text else [], strict=False) if v}


class Planner:
    """Builds the plans for one configuration and one process (``process``: this process's id,
    random by default; it names the process's lease and its connections)."""

    def __init__(self, config: StoreConfig, process: str | None = None) -> None:
        self.config = config
        self.keys = KeySpace(config.prefix, config.shards)
        self.process = process or secrets.token_hex(4)

    # -- building blocks --------------------------------------------------------------------
    def call(self, script: str, tag: str, now: float | None, *args: Any) -> Call:
        keys = (
            KeySpace.seen(tag),
            KeySpace.hidden(tag),
            KeySpace.until(tag),
            KeySpace.procs(tag),
            KeySpace.last(tag),
        )
        return Call(script, keys, self.head(tag, now) + args)

    def head(self, tag: str, now: float | None) -> tuple[Any, ...]:
        """The arguments every script starts with (lua/head.lua): the shard, the clock, the
        timers, the registry's size and this process."""
        c = self.config
        return (
            tag,
            "" if now is None else repr(float(now)),
            c.lease_ttl,
            c.disconnect_grace,
            c.online_window,
            c.idle_after,
            int(c.metadata_ttl),
            c.registry_buckets,
            self.process,
        )

    def user_call(self, script: str, user_id: str, now: float | None, *args: Any) -> Call:
        return self.call(script, self.keys.tag_for_user(user_id), now, *args)

    def transitions(self, script: str, user_id: Any, now: float | None, *args: Any) -> Plan:
        uid = inputs.user_id(user_id)
        return Plan([self.user_call(script, uid, now, uid, *args)], _flat_transitions)

    def by_shard(self, user_ids: Iterable[str]) -> dict[str, list[str]]:
        if self.keys.shards == 1:
            ids = list(user_ids)
            return {self.keys.tag(0): ids} if ids else {}
        groups: dict[str, list[str]] = {}
        for uid in user_ids:
            groups.setdefault(self.keys.tag(shard_of(uid, self.keys.shards)), []).append(uid)
        return groups

    # -- reads ---------------------------------------------------------------------------------
    def get_many(
        self,
        user_ids: Iterable[Any],
        viewer: Any,
        reveal_all: bool,
        now: float | None,
        activity: bool = False,
    ) -> Plan:
        """One short script call a shard (per 1,000 ids: Lua's unpack has a limit), all in one
        round trip; the derivation is Python's (derive.py). ``activity``: the script also reads
        each user's registry field, for a connected plain user's last activity (an HGET a
        user)."""
        uids = inputs.user_ids(user_ids)
        viewer_id = "" if viewer is None else inputs.user_id(viewer)
        chunks = [
            (tag, ids[i : i + READ_CHUNK])
            for tag, ids in self.by_shard(uids).items()
            for i in range(0, len(ids), READ_CHUNK)
        ]
        calls = [
            self.call("get_many", tag, now, *self.read_args(ids, activity)) for tag, ids in chunks
        ]
        derive = deriver(viewer_id, reveal_all, self.config)

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

    def online(
        self,
        window: float | None,
        offset: int,
        limit: int | None,
        include_invisible: bool,
        now: float | None,
        after: tuple[float, str] | None = None,
        scores: bool = False,
    ) -> Plan:
        """The online ids, most recently seen first (score, then id, both descending: the
        indexes' own order), from ``offset``; with ``after`` (a listed entry's ``(score, id)``)
        the list goes on after it wherever it stands now, each index read from there (a page
        costs its own size, however deep). ``scores``: ``(id, score)`` pairs, for a position."""
        if offset < 0 or (limit is not None and limit < 0):
            raise InvalidInput("offset and limit must not be negative")
        position: tuple[str, ...] = ()
        if after is not None:
            try:
                score, last = float(after[0]), inputs.user_id(after[1])
            except (TypeError, ValueError, IndexError) as exc:
                raise InvalidInput(f"after must be an entry's (score, id): {exc}") from None
            if not math.isfinite(score):
                raise InvalidInput("after must be an entry's (score, id): a finite score")
            position = (repr(score), last)
        # Each shard's index is a sorted source: the connected ("0"), the HTTP-only ("2": seen's
        # negative scores, listed with their web scores) and, for superusers, the invisible ("1"). Take the first offset + limit of each (past the
        # position) and merge them, most recent first.
        count = -1 if limit is None else offset + limit
        seen_within = inputs.window(window)
        indexes = ["0", "2", "1"] if include_invisible else ["0", "2"]
        calls = [
            self.call("online", tag, now, "list", index, seen_within, count, *position)
            for tag in self.keys.all_tags()
            for index in indexes
        ]

        def finish(replies: list[Any]) -> list[Any]:
            streams = [
                [(float(reply[i + 1]), _str(reply[i])) for i in range(0, len(reply), 2)]
                for reply in replies
            ]
            merged = list(heapq.merge(*streams, reverse=True))
            merged = merged[offset:] if limit is None else merged[offset : offset + limit]
            return [(uid, score) for score, uid in merged] if scores else [u for _, u in merged]

        return Plan(calls, finish)

    def online_count(self, window: float | None, now: float | None) -> Plan:
        seen_within = inputs.window(window)
        calls = [
            self.call("online", tag, now, "count", index, seen_within)
            for tag in self.keys.all_tags()
            for index in ("0", "2")
        ]
        return Plan(calls, lambda replies: sum(int(r) for r in replies))

    def state_counts(self, limit: int, now: float | None) -> Plan:
        calls = [self.call("counts", tag, now, int(limit)) for tag in self.keys.all_tags()]

        def finish(replies: list[Any]) -> StateCounts:
            sums = [sum(int(reply[i]) for reply in replies) for i in range(6)]
            total, hidden, counted, online, idle, dnd = sums
            return StateCounts(online, idle, dnd, hidden, total, counted)

        return Plan(calls, finish)

    def user_rooms(self, user_ids: Iterable[Any]) -> Plan:
        """The rooms of the users' connections, from their records (a plain user has none)."""
        uids = inputs.user_ids(user_ids)
        calls = [
            Call("", (), ("HGET", KeySpace.records(self.keys.tag_for_user(u)), u)) for u in uids
        ]

        def rooms(raw: Any) -> list[str]:
            conns = _record(raw).get("conns")
            entries = json.loads(conns).values() if conns else ()
            # an entry is [process, room, ...]; a closed one's process is "~<end of its grace>"
            return sorted({r for e in entries if isinstance(e, list) for r in e[1:]})

        return Plan(
            calls, lambda replies: {u: rooms(r) for u, r in zip(uids, replies, strict=True)}
        )

    def export(self, user_id: Any) -> Plan:
        """Everything the store keeps of a user: their record, their score in each index, and
        their connections (the record's, and a plain user's one in the registry). An HTTP-only
        user's score is in ``seen`` negated (one index); it is given as ``web``, positive."""
        uid = inputs.user_id(user_id)
        tag = self.keys.tag_for_user(uid)
        names = ("seen", "hidden", "until", "last", "graces", "rexp", "copies")
        bucket = registry_bucket(uid, self.config.registry_buckets)
        calls = [
            Call("", (), ("HGET", KeySpace.records(tag), uid)),
            Call("", (), ("HGET", KeySpace.registry(tag, bucket), uid)),
        ]
        calls += [Call("", (), ("ZSCORE", f"{tag}:{name}", uid)) for name in names]

        def finish(replies: list[Any]) -> dict[str, Any]:
            raw, registry, *scores = replies
            record = _record(raw)
            conns = set(json.loads(record["conns"])) if "conns" in record else set()
            if registry:  # "process \x1f conn \x1f last activity"
                conns.add(_str(registry).split(SEP)[1])
            indexes = {n: float(v) for n, v in zip(names, scores, strict=True) if v}
            if indexes.get("seen", 0.0) < 0:  # HTTP only: their web score, negated
                indexes["web"] = -indexes.pop("seen")
            return {
                "user": uid,
                "record": record,
                "indexes": indexes,
                "connections": sorted(conns),
            }

        return Plan(calls, finish)

    def room_members(self, room: str, now: float | None, among: Any = None) -> Plan:
        name = inputs.room(room)
        if among is None:
            calls = [self.call("room", tag, now, name) for tag in self.keys.all_tags()]
        else:  # only these ids: each shard asked of its own, none asked of a shard with none
            by_tag: dict[str, list[str]] = {}
            for uid in inputs.user_ids(among):
                by_tag.setdefault(self.keys.tag_for_user(uid), []).append(uid)
            calls = [self.call("room", tag, now, name, *ids) for tag, ids in by_tag.items()]

        def finish(replies: list[Any]) -> list[str]:
            streams = [
                [(float(reply[i + 1]), _str(reply[i])) for i in range(0, len(reply), 2)]
                for reply in replies
            ]
            if among is not None:  # in the order asked: put in the order they came
                streams = [sorted(stream) for stream in streams]
            return [uid for _, uid in heapq.merge(*streams)]

        return Plan(calls, finish)

    # -- writes --------------------------------------------------------------------------------
    def touch(self, user_id: Any, activity: bool, now: float | None) -> Plan:
        return self.transitions("touch", user_id, now, "1" if activity else "0")

    def touch_many(self, items: Iterable[tuple[Any, bool]], now: float | None) -> Plan:
        """Touches many users: one script call per shard, each user in the order given."""
        groups: dict[str, list[str]] = {}
        for user_id, activity in items:
            uid = inputs.user_id(user_id)
            groups.setdefault(self.keys.tag_for_user(uid), []).extend(
                (uid, "1" if activity else "0")
            )
        calls = [self.call("touch", tag, now, *args) for tag, args in groups.items()]
        return Plan(calls, _flat_transitions)

    def activity(self, user_id: Any, now: float | None) -> Plan:
        return self.transitions("activity", user_id, now)

    def idle(self, user_id: Any, now: float | None) -> Plan:
        return self.transitions("idle", user_id, now)

    def forget(self, user_id: Any, now: float | None) -> Plan:
        return self.transitions("forget", user_id, now)

    def connect(
        self,
        conn_id: str,
        user_id: Any,
        device: str | None,
        now: float | None,
        max_connections: int = 0,
    ) -> Plan:
        dev = inputs.text(device or "", MAX_DEVICE_LENGTH, "device")
        most = int(max_connections or 0)
        return self.transitions("connect", user_id, now, inputs.conn_id(conn_id), dev, most)

    def disconnect(self, conn_id: str, user_id: Any, now: float | None) -> Plan:
        return self.transitions("disconnect", user_id, now, inputs.conn_id(conn_id))

    def join(self, room: str, conn_id: str, user_id: Any, now: float | None) -> Plan:
        return self.transitions("join", user_id, now, inputs.conn_id(conn_id), inputs.room(room))

    def leave(self, room: str, conn_id: str, user_id: Any, now: float | None) -> Plan:
        return self.transitions("leave", user_id, now, inputs.conn_id(conn_id), inputs.room(room))

    def heartbeat_many(self, pairs: Iterable[tuple[str, Any]], now: float | None) -> Plan:
        """Renews many connections: one script call per shard, every shard called, members or
        not, as a batch is also the process's keepalive (its lease lives in every shard it may
        hold connections in). The result lists the (conn, user) pairs the store no longer
        holds, whose owners should connect and join again."""
        members = inputs.lease_members(pairs)
        groups: dict[str, list[str]] = {}  # the shards in the order of their first member
        if self.keys.shards == 1:
            groups[self.keys.tag(0)] = members
        else:
            for member in members:
                uid = member.rpartition(CONN_SEP)[0]
                groups.setdefault(self.keys.tag_for_user(uid), []).append(member)
        for tag in self.keys.all_tags():
            groups.setdefault(tag, [])
        calls = [self.call("heartbeat", tag, now, *group) for tag, group in groups.items()]

        def finish(replies: list[Any]) -> list[tuple[str, str]]:
            missing = []
            for reply in replies:
                for member in reply:
                    uid, _, cid = _str(member).rpartition(CONN_SEP)
                    missing.append((cid, uid))
            return missing

        return Plan(calls, finish)

    def set_status(
        self,
        user_id: Any,
        state: str | None,
        message: Any,
        emoji: Any,
        device: Any,
        expires_in: float | None,
        meta: dict[str, Any] | None,
        now: float | None,
        read_back: bool = False,
    ) -> Plan:
        """The status change; with ``read_back`` the plan's result is ``(transitions, the
        user's presence after it as they see it themselves)``, read by the same script call
        (a second call could run before it on a Redis Cluster client)."""
        if state is not None:
            inputs.state(state)
        updates: dict[str, Any] = {}
        if message is not _UNSET and message is not None:
            updates["msg"] = inputs.text(message, self.config.max_message_length, "message") or None
        if emoji is not _UNSET and emoji is not None:
            updates["emoji"] = inputs.text(emoji, inputs.MAX_EMOJI_LENGTH, "emoji") or None
        if device is not _UNSET and device is not None:
            updates["dev"] = inputs.text(device, MAX_DEVICE_LENGTH, "device") or None
        if "msg" in updates or "emoji" in updates:
            if expires_in is not None:
                # The clock of the expiry is the caller's `now` or, failing that, Redis' own:
                # the script adds it (see set_status.lua's 'mx+').
                updates["mx+"] = inputs.expires_in(expires_in)
            else:
                updates["mx"] = None
        if meta:
            try:
                encoded = json.dumps(meta, separators=(",", ":"), allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise InvalidInput(f"metadata must be JSON-serialisable: {exc}") from None
            if len(encoded.encode()) > self.config.max_metadata_bytes:
                raise InvalidInput(
                    f"metadata is larger than {self.config.max_metadata_bytes} bytes"
                )
            updates["meta"] = encoded
        changes = json.dumps(updates, separators=(",", ":"))
        if not read_back:
            return self.transitions("set_status", user_id, now, state or "", changes)
        uid = inputs.user_id(user_id)
        bucket = registry_bucket(uid, self.config.registry_buckets)
        call = self.user_call("set_status", uid, now, uid, state or "", changes, bucket)
        derive = deriver(uid, False, self.config)

        def finish(replies: list[Any]) -> tuple[list[Transition], Presence]:
            told, read = replies[0]
            return Transition.parse_many(told), derive([uid], read)[uid]

        return Plan([call], finish)

    def sweep(self, now: float | None) -> Plan:
        calls = [
            self.call("sweep", tag, now, self.config.sweep_batch) for tag in self.keys.all_tags()
        ]

        def finish(replies: list[Any]) -> tuple[bool, list[Transition]]:
            more = any(int(reply[0]) for reply in replies)
            return more, _flat_transitions([reply[1] for reply in replies])

        return Plan(calls, finish)
