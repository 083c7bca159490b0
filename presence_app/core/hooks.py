"""The project's hooks (``CAN_JOIN``, ``AUDIENCE``, ``TENANT``), called one way everywhere.

A hook is a setting naming a callable or a dotted path, sync or async. :func:`call` (sync code)
and :func:`acall` (async code) call it correctly in both worlds: an async hook is awaited (from
sync code it runs on ``async_to_sync``), a sync one runs in a thread from async code
(``database_sync_to_async``: it may use the ORM). A hook that raises is a bug of the site: it is
let through.
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

from .. import conf


@cache
def _resolve(spec: Any) -> Callable[..., Any] | None:
    return import_string(spec) if isinstance(spec, str) else spec


def hook(name: str) -> Callable[..., Any] | None:
    """The setting ``name`` as a callable (None when unset)."""
    spec = conf.get(name)
    return None if spec is None else _resolve(spec)


def call(
    name: str, *args: Any, default: Any = None, then: Callable[[Any], Any] | None = None
) -> Any:
    """The hook ``name``'s answer to ``args`` (``default`` without one); ``then`` runs on the
    answer in the hook's thread (a generator or a queryset is read there, not here)."""
    fn = hook(name)
    if fn is None:
        return default
    answer = async_to_sync(fn)(*args) if iscoroutinefunction(fn) else fn(*args)
    return then(answer) if then is not None else answer


async def acall(
    name: str, *args: Any, default: Any = None, then: Callable[[Any], Any] | None = None
) -> Any:
    """:func:`call` for async code."""
    fn = hook(name)
    if fn is None:
        return default
    if iscoroutinefunction(fn):
        answer = await fn(*args)
        return then(answer) if then is not None else answer
    return await database_sync_to_async(lambda: (then or _same)(fn(*args)))()


def _same(value: Any) -> Any:
    return value


def can_join(user: Any, room: str) -> bool:
    """May ``user`` enter (and so see) ``room``? True without a ``CAN_JOIN`` hook."""
    return bool(call("CAN_JOIN", user, room, default=True))


async def acan_join(user: Any, room: str) -> bool:
    """:func:`can_join` for async code."""
    return bool(await acall("CAN_JOIN", user, room, default=True))


@receiver(setting_changed)
def _reset(*, setting: str, **kwargs: Any) -> None:
    if setting == "PRESENCE":
        _resolve.cache_clear()
