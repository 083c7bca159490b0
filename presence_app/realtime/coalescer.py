"""Coalesced heartbeats: one process writes the heartbeats of all its sockets in batches; and
the closes and leaves Redis did not take, retried.

A heartbeat frame only marks its socket in a dict; a task per event loop (a
:class:`~presence_app.core.tasks.Batch`) renews every marked lease with one ``heartbeat_many``
call (one script call per shard) every ``HEARTBEAT_FLUSH_INTERVAL`` seconds. 10,000 sockets beating every 30 s cost ~1 Redis call a
second, not 330. Pairs Redis reports as holding no lease (swept, or lost with a Redis restart)
are handed back to their socket, which connects and joins its rooms again.

The coalescer is also the process's keepalive: the process's lease (K_PROCS, in every shard of
a tenant's key space) is what keeps the connections it holds alive in Redis, and only its
heartbeats, connects, disconnects and sweeps renew it (not its other writes: join, leave,
set_status, touch, activity, idle). While the process holds an open connection of a tenant
(:meth:`HeartbeatCoalescer.hold`, from its open to its close), a batch of that tenant is
written at least every ``LEASE_TTL / 3`` seconds, an empty one when no beat is due (its
users all silent, a stream between beats), so that the lease never runs out under a live
process, whatever its users send.

Bounded whatever Redis does: ``pending`` holds at most one entry per socket, one flush runs at a
time (a slow Redis delays the next, it does not stack them), and a flush writes at most
``MAX_BATCH`` leases per script call, so no single call holds Redis for long.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from contextlib import suppress
from typing import Any, Protocol

from .. import conf, presence
from ..core import tenants
from ..core.tasks import Batch, per_loop
from ..failopen import log_outage
from ..store import UNAVAILABLE, UnknownConnection

logger = logging.getLogger("presence_app")

#: Leases per heartbeat_many call: benchmark 1's fastest batch (docs/benchmarks.md: ~4 ms of
#: Redis per call; a batch of 10,000 holds Redis ~50 ms, and other clients wait meanwhile).
MAX_BATCH = 1000


class Beating(Protocol):
    conn_id: str
    user_id: str
    tenant: str | None

    def lease_lost(self) -> None:
        """Redis holds no lease for this socket: connect and join again."""

    def lease_unavailable(self) -> None:
        """The batch could not be written (Redis away); it is retried with the next one."""


class HeartbeatCoalescer(Batch):
    pending: dict[tuple[str, str], Beating]
    at_once = False  # a round's beats in one call: no lease is that urgent

    def __init__(self) -> None:
        super().__init__()
        # the open connections of this loop, by tenant (the process's keepalive: module doc)
        self.held: dict[str | None, dict[tuple[str, str], None]] = {}
        # tenant -> loop time at which its last batch was sent (the lease renewed from then)
        self.renewed: dict[str | None, float] = {}

    def wait(self, last: float) -> float:
        return min(float(conf.get("HEARTBEAT_FLUSH_INTERVAL")), 1.0)

    def keepalive(self) -> float:
        """Seconds between two batches of a tenant whose connections are open, at most."""
        return float(conf.get("LEASE_TTL")) / 3

    def beat(self, owner: Beating) -> None:
        self.pending[(owner.conn_id, owner.user_id)] = owner
        self.wake()

    def hold(self, owner: Beating) -> None:
        """The socket is open (its connect just renewed the lease): the process's lease is kept
        for its tenant until :meth:`forget`."""
        tenant = getattr(owner, "tenant", None)
        self.held.setdefault(tenant, {})[(owner.conn_id, owner.user_id)] = None
        self.renewed.setdefault(tenant, asyncio.get_running_loop().time())
        self.wake()

    def forget(self, owner: Beating) -> None:
        """The socket closed: its pending beat is moot (disconnect sets the lease itself)."""
        self.pending.pop((owner.conn_id, owner.user_id), None)
        tenant = getattr(owner, "tenant", None)
        held = self.held.get(tenant)
        if held is not None:
            held.pop((owner.conn_id, owner.user_id), None)
            if not held:
                del self.held[tenant]

    def holding(self) -> bool:
        return bool(self.held)

    def lapsing(self) -> list[str | None]:
        """The tenants with open connections whose last batch is a keepalive's period old."""
        old = asyncio.get_running_loop().time() - self.keepalive()
        return [t for t in self.held if self.renewed.get(t, old) <= old]

    def due(self) -> bool:
        return bool(self.pending) or bool(self.lapsing())

    async def flush(self) -> None:
        batch, self.pending = self.pending, {}
        by_tenant: dict[str | None, dict[tuple[str, str], Beating]] = {}
        for key, owner in batch.items():  # each tenant's leases live in its own key space
            by_tenant.setdefault(getattr(owner, "tenant", None), {})[key] = owner
        for tenant in self.lapsing():  # no beat due: an empty batch renews the lease alone
            by_tenant.setdefault(tenant, {})
        for tenant, part in by_tenant.items():
            with tenants.activate(tenant):
                await self._flush(part, tenant)

    async def _flush(self, batch: dict[tuple[str, str], Beating], tenant: str | None) -> None:
        pairs = list(batch)
        for start in range(0, max(len(pairs), 1), MAX_BATCH):
            self.flushes += 1
            sent = asyncio.get_running_loop().time()
            try:
                missing = await presence.aheartbeat_many(pairs[start : start + MAX_BATCH])
            except UNAVAILABLE as exc:
                log_outage(exc, f"{len(pairs) - start} heartbeats")
                for key in pairs[start:]:
                    if not getattr(batch[key], "closed", False):  # a closed one needs no beat
                        self.pending.setdefault(key, batch[key])
                        batch[key].lease_unavailable()
                return
            self.renewed[tenant] = sent  # every batch renews the lease in all the shards
            # A socket that closed while its beat was on its way had its lease cut to the grace,
            # which the beat may have renewed for a whole LEASE_TTL: cut it again.
            for conn_id, user_id in pairs[start : start + MAX_BATCH]:
                if getattr(batch[(conn_id, user_id)], "closed", False):
                    await disconnect(conn_id, user_id, tenant=tenants.current())
            for pair in missing:
                owner = batch.get(pair)
                if owner is not None:
                    owner.lease_lost()


#: A leave's retry asks whether its connection is in the room again (joined since): None for a
#: disconnect, or a connection's own (held weakly: a closed one is let go).
Rejoined = Callable[[], bool]


class Retries(Batch):
    """Disconnects and leaves Redis did not take (away, a call timed out), retried every second
    until it does. A disconnect: the user would otherwise stay present until their lease runs
    out, beside another device of theirs as long as the process lives, and the connection's
    registry field with it. A leave: the connection stays in the room for the others while the
    client has left it. A retry is harmless: the store ends a connection, or takes it out of a
    room, once; a leave Redis did although its call failed was told to nobody, so a retry that
    finds nothing to do tells the room, if the user is in it no more."""

    pending: dict[tuple[str, str, str | None], tuple[str | None, Rejoined | None]]
    at_once = False  # a second later: Redis away, or a call that timed out under load
    idle = 1

    def wait(self, last: float) -> float:
        return 1.0

    def put(
        self, key: tuple[str, str, str | None], tenant: str | None, rejoined: Rejoined | None
    ) -> None:
        self.pending[key] = (tenant, rejoined)
        self.wake()

    async def flush(self) -> None:
        todo, self.pending = list(self.pending.items()), {}
        told: set[tuple[str | None, str, str]] = set()  # two devices' leaves: one told
        for i, ((conn_id, user_id, room), (tenant, rejoined)) in enumerate(todo):
            self.flushes += 1
            try:
                with tenants.activate(tenant):
                    if room is None:
                        await presence.adisconnect(conn_id, user_id)
                    elif not (rejoined is not None and rejoined()):
                        await self._leave(room, conn_id, user_id, rejoined, told)
            except UNAVAILABLE as exc:  # still away: this one and the rest, a round later
                log_outage(exc, f"{len(todo) - i} disconnects and leaves")
                for key, entry in todo[i:]:
                    self.pending.setdefault(key, entry)
                return
            except Exception:  # not Redis away: retrying would not help; the others go on
                logger.exception("presence: a retried disconnect or leave failed")

    async def _leave(
        self,
        room: str,
        conn_id: str,
        user_id: str,
        rejoined: Rejoined | None,
        told: set[tuple[str | None, str, str]],
    ) -> None:
        left = await presence.aleave(room, conn_id, user_id)
        if rejoined is not None and rejoined():
            # Joined again while this leave was on its way, whose join Redis may have taken
            # first: in the room it stays (a join of a connection there already is nothing).
            with suppress(UnknownConnection):
                await presence.ajoin(room, conn_id, user_id)
            return
        key = (tenants.current(), user_id, room)
        if any(t.kind == "leave" and t.room == room for t in left):
            told.add(key)
        elif key not in told and await presence.aannounce_leave(room, user_id):
            told.add(key)


async def disconnect(conn_id: str, user_id: str, *, tenant: str | None) -> None:
    """Ends a connection in the store now, or, Redis not taking it, a second later and on."""
    try:
        with tenants.activate(tenant):
            await presence.adisconnect(conn_id, user_id)
    except UNAVAILABLE as exc:
        log_outage(exc, "a disconnect")
        _retries().put((conn_id, user_id, None), tenant, None)


def leave_later(room: str, session: Any) -> None:
    """A leave of ``session``'s that Redis did not take: retried a second later and on (unless
    the connection is in the room again by then), then told to the room."""
    ref = weakref.ref(session)

    def rejoined() -> bool:
        held = ref()
        return held is not None and room in held.rooms

    _retries().put((session.conn_id, session.user_id, room), session.tenant, rejoined)


_coalescer = per_loop(HeartbeatCoalescer)
_retries = per_loop(Retries)


def get_retries() -> Retries:
    """The retries of the running event loop (tests count their ``flushes``)."""
    return _retries()


def get_coalescer() -> HeartbeatCoalescer:
    """The coalescer of the running event loop (one per process under an ASGI server)."""
    return _coalescer()
