"""The project's hooks, resolved once and awaited the same way by every entry point.

``CAN_JOIN`` may be a callable or a dotted path, sync or async. :func:`can_join` (sync code)
and :func:`acan_join` (async code) call it correctly in both worlds: an async hook is awaited
(called from sync code it runs on ``async_to_sync``), a sync one runs in a thread from async
code (``database_sync_to_async``: it may use the ORM). A hook that raises is a bug of the site: it is let through.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from asgiref.sync import async_to_sync, iscoroutinefunction
from channels.db import database_sync_to_async
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from . import conf


@cache
def _resolve(spec: Any) -> Callable[..., Any] | None:
    return import_string(spec) if isinstance(spec, str) else spec


def hook(name: str) -> Callable[..., Any] | None:
    """The setting ``name`` as a callable (None when unset)."""
    spec = conf.get(name)
    return None if spec is None else _resolve(spec)


def can_join(user: Any, room: str) -> bool:
    """May ``user`` enter (and so see) ``room``? True without a ``CAN_JOIN`` hook."""
    check = hook("CAN_JOIN")
    if check is None:
        return True
    if iscoroutinefunction(check):
        return bool(async_to_sync(check)(user, room))
    return bool(check(user, room))


async def acan_join(user: Any, room: str) -> bool:
    """:func:`can_join` for async code."""
    check = hook("CAN_JOIN")
    if check is None:
        return True
    if iscoroutinefunction(check):
        return bool(await check(user, room))
    return bool(await database_sync_to_async(check)(user, room))


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting == "PRESENCE":
        _resolve.cache_clear()
