"""Each read of the front door is defined once (a generator in presence.py); its sync function,
its ``a``-prefixed coroutine and its batched plan (``Reads``) derive from that definition, so
they take the same arguments and give the same answers. And ``a`` means a coroutine everywhere."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import time

import pytest
from asgiref.sync import async_to_sync, iscoroutinefunction

import presence_app
from presence_app import presence


@pytest.mark.parametrize("name", sorted(presence.READS))
def test_the_three_forms_of_a_read_share_one_signature(name):
    definition = presence.READS[name]
    sync, coroutine = getattr(presence, name), getattr(presence, f"a{name}")
    assert inspect.iscoroutinefunction(coroutine) and not inspect.iscoroutinefunction(sync)
    expected = inspect.signature(definition)
    assert inspect.signature(sync) == expected
    assert inspect.signature(coroutine) == expected
    assert inspect.signature(getattr(presence.Reads(), name)) == expected


ARGS = {
    "get": (("u1",), {}),
    "get_many": ((["u1", "u2", "u3"],), {}),
    "user_rooms_many": ((["u1", "u2", "u3"],), {}),
    "room_members": (("lobby",), {}),
    "room_count": (("lobby",), {}),
    "history": ((0,), {}),
}


@pytest.mark.django_db
@pytest.mark.parametrize("viewer", [presence.ANONYMOUS, "u1", presence.TRUSTED])
def test_the_three_forms_give_the_same_answers(redis_client, viewer):
    now = time.time()
    for n, uid in enumerate(["u1", "u2", "u3"]):
        presence.connect(f"c{n}", uid, now=now)
        presence.join("lobby", f"c{n}", uid, now=now)
    presence.set_status("u2", "invisible", now=now)
    reads = presence.Reads()
    names = sorted(presence.READS)
    calls = []
    for name in names:
        args, kwargs = ARGS.get(name, ((), {}))
        if "now" in inspect.signature(presence.READS[name]).parameters:
            kwargs = {**kwargs, "now": now}
        if "viewer" in inspect.signature(presence.READS[name]).parameters:
            kwargs = {**kwargs, "viewer": viewer}
        calls.append((name, args, kwargs))
    synced = [getattr(presence, name)(*args, **kw) for name, args, kw in calls]
    awaited = [
        async_to_sync(getattr(presence, f"a{name}"))(*args, **kw) for name, args, kw in calls
    ]
    batched = presence.batch(*(getattr(reads, name)(*args, **kw) for name, args, kw in calls))
    assert synced == awaited == batched
    answers = dict(zip(names, synced, strict=True))
    shown = {"u1", "u3", "u2"} if viewer is presence.TRUSTED else {"u1", "u3"}
    assert {u for u, p in answers["get_many"].items() if p.is_online} == shown


def test_the_a_prefix_means_a_coroutine_everywhere():
    offenders = []
    for info in pkgutil.walk_packages(presence_app.__path__, "presence_app."):
        if "migrations" in info.name or info.name.endswith("pytest_plugin"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as exc:  # an optional extra's dependency (contrib.drf)
            if (exc.name or "").startswith("presence_app"):
                raise
            continue
        names = vars(module)
        for name, value in names.items():
            twin = names.get(name[1:]) if name.startswith("a") else None
            # "aX" beside "X": the async twin, which must be awaited.
            if callable(twin) and callable(value) and not iscoroutinefunction(value):
                offenders.append(f"{info.name}.{name}")
    assert offenders == []
