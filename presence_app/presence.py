"""The public Python API: ``from presence_app import presence``.

Each function runs on the project's default store (``PRESENCE`` settings). The ``a``-prefixed
twins (``aget``, ``ajoin``, ...) are the same calls for async code, the way Django names its own.
State changes return the list of :class:`~presence_app.store.Transition` they made; the
WebSocket consumer and the sweeper turn those into events and signals.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .connection import get_async_store, get_store
from .store import Presence, Transition
from .store.plans import _UNSET

UserId = str | int


def touch(user_id: UserId, activity: bool = True, now: float | None = None) -> list[Transition]:
    return get_store().touch(user_id, activity, now)


def activity(user_id: UserId, now: float | None = None) -> list[Transition]:
    return get_store().activity(user_id, now)


def connect(conn_id: str, user_id: UserId, now: float | None = None, device: str | None = None) -> list[Transition]:
    return get_store().connect(conn_id, user_id, now, device)


def heartbeat(conn_id: str, user_id: UserId, now: float | None = None) -> bool:
    return get_store().heartbeat(conn_id, user_id, now)


def heartbeat_many(pairs: Iterable[tuple[str, UserId]], now: float | None = None) -> list[tuple[str, str]]:
    return get_store().heartbeat_many(pairs, now)


def disconnect(conn_id: str, user_id: UserId, now: float | None = None) -> list[Transition]:
    return get_store().disconnect(conn_id, user_id, now)


def join(room: str, conn_id: str, user_id: UserId, now: float | None = None) -> list[Transition]:
    return get_store().join(room, conn_id, user_id, now)


def leave(room: str, conn_id: str, user_id: UserId, now: float | None = None) -> list[Transition]:
    return get_store().leave(room, conn_id, user_id, now)


def set_status(user_id: UserId, state: str | None = None, message: str | None = _UNSET,
               emoji: str | None = _UNSET, **kwargs: Any) -> list[Transition]:
    return get_store().set_status(user_id, state, message, emoji, **kwargs)


def get(user_id: UserId, *, viewer: UserId | None = None, reveal_all: bool = False,
        now: float | None = None) -> Presence:
    return get_store().get(user_id, viewer=viewer, reveal_all=reveal_all, now=now)


def get_many(user_ids: Iterable[UserId], *, viewer: UserId | None = None, reveal_all: bool = False,
             now: float | None = None) -> dict[str, Presence]:
    return get_store().get_many(user_ids, viewer=viewer, reveal_all=reveal_all, now=now)


def online(window: float | None = None, offset: int = 0, limit: int | None = None,
           now: float | None = None, *, include_invisible: bool = False) -> list[str]:
    return get_store().online(window, offset, limit, now, include_invisible=include_invisible)


def online_count(window: float | None = None, now: float | None = None) -> int:
    return get_store().online_count(window, now)


def room_members(room: str, now: float | None = None) -> list[str]:
    return get_store().room_members(room, now)


def room_count(room: str, now: float | None = None) -> int:
    return get_store().room_count(room, now)


def sweep(now: float | None = None) -> list[Transition]:
    return get_store().sweep(now)


# -- async twins ------------------------------------------------------------------------------
async def atouch(user_id: UserId, activity: bool = True, now: float | None = None) -> list[Transition]:
    return await get_async_store().touch(user_id, activity, now)


async def aactivity(user_id: UserId, now: float | None = None) -> list[Transition]:
    return await get_async_store().activity(user_id, now)


async def aconnect(conn_id: str, user_id: UserId, now: float | None = None, device: str | None = None) -> list[Transition]:
    return await get_async_store().connect(conn_id, user_id, now, device)


async def aheartbeat(conn_id: str, user_id: UserId, now: float | None = None) -> bool:
    return await get_async_store().heartbeat(conn_id, user_id, now)


async def aheartbeat_many(pairs: Iterable[tuple[str, UserId]], now: float | None = None) -> list[tuple[str, str]]:
    return await get_async_store().heartbeat_many(pairs, now)


async def adisconnect(conn_id: str, user_id: UserId, now: float | None = None) -> list[Transition]:
    return await get_async_store().disconnect(conn_id, user_id, now)


async def ajoin(room: str, conn_id: str, user_id: UserId, now: float | None = None) -> list[Transition]:
    return await get_async_store().join(room, conn_id, user_id, now)


async def aleave(room: str, conn_id: str, user_id: UserId, now: float | None = None) -> list[Transition]:
    return await get_async_store().leave(room, conn_id, user_id, now)


async def aset_status(user_id: UserId, state: str | None = None, message: str | None = _UNSET,
                      emoji: str | None = _UNSET, **kwargs: Any) -> list[Transition]:
    return await get_async_store().set_status(user_id, state, message, emoji, **kwargs)


async def aget(user_id: UserId, *, viewer: UserId | None = None, reveal_all: bool = False,
               now: float | None = None) -> Presence:
    return await get_async_store().get(user_id, viewer=viewer, reveal_all=reveal_all, now=now)


async def aget_many(user_ids: Iterable[UserId], *, viewer: UserId | None = None,
                    reveal_all: bool = False, now: float | None = None) -> dict[str, Presence]:
    return await get_async_store().get_many(user_ids, viewer=viewer, reveal_all=reveal_all, now=now)


async def aonline(window: float | None = None, offset: int = 0, limit: int | None = None,
                  now: float | None = None, *, include_invisible: bool = False) -> list[str]:
    return await get_async_store().online(window, offset, limit, now, include_invisible=include_invisible)


async def aonline_count(window: float | None = None, now: float | None = None) -> int:
    return await get_async_store().online_count(window, now)


async def aroom_members(room: str, now: float | None = None) -> list[str]:
    return await get_async_store().room_members(room, now)


async def aroom_count(room: str, now: float | None = None) -> int:
    return await get_async_store().room_count(room, now)


async def asweep(now: float | None = None) -> list[Transition]:
    return await get_async_store().sweep(now)
