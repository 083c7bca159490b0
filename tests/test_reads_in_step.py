"""Each read of the front door is defined once (a generator in presence.py); its sync function,
its ``a``-prefixed coroutine and its batched plan (``Reads``) derive from that definition, so
they take the same arguments and give the same answers. And ``a`` means a coroutine everywhere."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync, iscoroutinefunction
from django.conf import settings
from django.test import override_settings

import presence_app
from presence_app import presence


def _calls(signature: inspect.Signature) -> list[tuple[tuple, dict, dict]]:
    """Calls naming every parameter of ``signature``, each with a value of its own: one passing
    all it may by position, one all it may by name. Each as (args, kwargs, {name: value})."""
    values = {name: object() for name in signature.parameters}
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    assert all(
        p.kind in (*positional, inspect.Parameter.KEYWORD_ONLY)
        for p in signature.parameters.values()
    ), signature  # no *args or **kwargs: every argument has a name to be found by
    by_position = [n for n, p in signature.parameters.items() if p.kind in positional]
    by_name_only = [n for n in values if n not in by_position]
    only_positional = [
        n for n, p in signature.parameters.items() if p.kind is inspect.Parameter.POSITIONAL_ONLY
    ]
    return [
        (
            tuple(values[n] for n in by_position),
            {n: values[n] for n in by_name_only},
            values,
        ),
        (
            tuple(values[n] for n in only_positional),
            {n: values[n] for n in values if n not in only_positional},
            values,
        ),
    ]


@pytest.mark.parametrize("name", sorted(presence.READS))
def test_the_three_forms_of_a_read_share_one_signature(name, monkeypatch):
    definition = presence.READS[name]
    sync, coroutine = getattr(presence, name), getattr(presence, f"a{name}")
    assert inspect.iscoroutinefunction(coroutine) and not inspect.iscoroutinefunction(sync)
    # What the forms show (help(), the docs, an IDE) is the definition's signature ...
    expected = inspect.signature(definition)
    assert inspect.signature(sync) == expected
    assert inspect.signature(coroutine) == expected
    # ... but functools.wraps copies that onto any wrapper, whatever it passes on: what each
    # form runs is read from the generator it drives (its code, and the arguments it was
    # called with, all of them named), for calls that give every parameter a value of its own.
    driven: list[Any] = []

    def drive(read: Any, store: Any, reply: Any = None) -> None:
        driven.append(read)

    async def adrive(read: Any, store: Any) -> None:
        driven.append(read)

    monkeypatch.setattr(presence, "_drive", drive)
    monkeypatch.setattr(presence, "_adrive", adrive)
    monkeypatch.setattr(presence, "get_store", lambda: None)
    monkeypatch.setattr(presence, "get_async_store", lambda: None)
    plan = getattr(presence.Reads(), name)
    for args, kwargs, values in _calls(expected):
        driven.clear()
        sync(*args, **kwargs)
        async_to_sync(coroutine)(*args, **kwargs)
        driven.append(plan(*args, **kwargs))  # a plan is the generator itself
        assert len(driven) == 3
        for form, read in zip(("sync", "async", "plan"), driven, strict=True):
            assert inspect.isgenerator(read), (form, read)
            assert read.gi_code is definition.__code__, (form, read.gi_code.co_name)
            assert inspect.getgeneratorlocals(read) == values, form
            read.close()


ARGS = {
    "get": (("u1",), {}),
    "get_many": ((["u1", "u2", "u3"],), {}),
    "user_rooms_many": ((["u1", "u2", "u3"],), {}),
    "room_members": (("lobby",), {}),
    "room_count": (("lobby",), {}),
    "room_sample": (("lobby", 2), {}),
    "history": ((0,), {}),
}


#: Who sees whom under the AUDIENCE policy below: a signed-out visitor u3 alone, u1 (besides
#: themself, whom every user sees) u2 alone; TRUSTED reads skip the policy.
AUDIENCE = {None: {"u3"}, "u1": {"u2"}}


def audience(viewer, user_ids):
    return [u for u in user_ids if u in AUDIENCE.get(viewer, set())]


@pytest.mark.django_db
@pytest.mark.parametrize("policy", [None, "tests.test_reads_in_step.audience"])
@pytest.mark.parametrize("viewer", [presence.ANONYMOUS, "u1", presence.TRUSTED])
def test_the_three_forms_give_the_same_answers(redis_client, viewer, policy):
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
    with override_settings(PRESENCE={**settings.PRESENCE, "AUDIENCE": policy}):
        synced = [getattr(presence, name)(*args, **kw) for name, args, kw in calls]
        awaited = [
            async_to_sync(getattr(presence, f"a{name}"))(*args, **kw) for name, args, kw in calls
        ]
        batched = presence.batch(*(getattr(reads, name)(*args, **kw) for name, args, kw in calls))
    assert synced == awaited == batched
    answers = dict(zip(names, synced, strict=True))
    if viewer is presence.TRUSTED:
        shown = {"u1", "u2", "u3"}
    else:
        shown = {"u1", "u3"}  # not u2: invisible
        if policy is not None:
            me = None if viewer is presence.ANONYMOUS else viewer
            shown &= AUDIENCE[me] | {me}
    assert {u for u, p in answers["get_many"].items() if p.is_online} == shown
    assert set(answers["online"]) == shown - {"u2"}
    assert set(answers["room_members"]) == shown - {"u2"}
    # counted as a signed-out visitor counts, whoever reads; the faces those the reader sees
    public = {"u1", "u3"} if policy is None else AUDIENCE[None]
    count, sample = answers["room_sample"]
    assert count == len(public) and {p.user_id for p in sample} == public & shown


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
