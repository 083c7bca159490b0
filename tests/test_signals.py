"""Signals: user_online, user_offline, status_changed, sent once per transition by the front
door of the process that observed it (a request's touch, a sweep, a status set from Python), and
LastSeen's receiver."""

import time
from datetime import datetime

import pytest
from asgiref.sync import sync_to_async
from django.http import HttpResponse
from django.test import AsyncRequestFactory, RequestFactory

from presence_app import presence, signals
from presence_app.core import dispatch
from presence_app.core.connection import store_config
from presence_app.jobs.touches import batcher
from presence_app.middleware import PresenceMiddleware
from presence_app.models import LastSeen
from presence_app.store import Store

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent():
    """[(signal name, user_id, state)] of every presence signal sent during the test."""
    log = []
    receivers = {}
    for name in ("user_online", "user_offline", "status_changed"):

        def receiver(sender, user_id, state, at, transition, _name=name, **kwargs):
            assert isinstance(at, datetime) and transition.user_id == user_id
            log.append((_name, user_id, state))

        receivers[name] = receiver
        getattr(signals, name).connect(receiver)
    yield log
    for name, receiver in receivers.items():
        getattr(signals, name).disconnect(receiver)


@pytest.fixture
def ann(django_user_model, redis_client):
    return django_user_model.objects.create_user("ann")


def request_as(user):
    request = RequestFactory().get("/")
    request.user = user
    return request


def test_first_request_sends_user_online_once(sent, ann):
    mw = PresenceMiddleware(lambda request: HttpResponse())
    for _ in range(3):
        mw(request_as(ann))
        batcher.flush()
    assert sent == [("user_online", str(ann.pk), "online")]


async def test_the_async_middleware_sends_it_too(sent, ann):
    async def get_response(request):
        return HttpResponse()

    mw = PresenceMiddleware(get_response)
    for _ in range(2):
        request = AsyncRequestFactory().get("/")

        async def auser():
            return ann

        request.auser = auser
        await mw(request)
        await sync_to_async(batcher.flush)()
    assert sent == [("user_online", str(ann.pk), "online")]


def test_offline_once_from_the_sweep_and_last_seen_recorded(sent, ann):
    now = time.time()
    presence.touch(ann.pk, now=now)
    for _ in range(2):
        presence.sweep(now=now + 61)  # as the `presence sweep` command or a cron task does
    uid = str(ann.pk)
    assert sent == [("user_online", uid, "online"), ("user_offline", uid, "offline")]
    assert LastSeen.objects.get(user=ann).last_seen_at.timestamp() == pytest.approx(now)


def test_status_changed_once_per_change(sent, ann):
    presence.touch(ann.pk)
    presence.set_status(ann.pk, "dnd")
    presence.set_status(ann, "dnd")  # a user object works as well; no change: no transition
    presence.set_status(ann.pk, "auto", message="Lunch")
    assert sent == [
        ("user_online", str(ann.pk), "online"),
        ("status_changed", str(ann.pk), "dnd"),
        ("status_changed", str(ann.pk), "online"),
    ]


def test_two_processes_sweeping_observe_each_transition_once(sent, ann, redis_client):
    now = time.time()
    presence.touch(ann.pk, now=now)
    sent.clear()  # the touch's own user_online
    one, two = Store(redis_client, store_config()), Store(redis_client, store_config())
    seen = one.sweep(now=now + 61) + two.sweep(now=now + 61)
    dispatch.publish(seen)
    assert sent == [("user_offline", str(ann.pk), "offline")]
