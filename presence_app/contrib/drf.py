"""Django REST framework: presence in your serializers and an "online only" filter.

``pip install "presence_app[drf]"``, then::

    from presence_app.contrib.drf import OnlineFilter, PresenceField


    class MemberSerializer(serializers.ModelSerializer):
        presence = PresenceField(source="*")  # the user itself

        class Meta:
            model = User
            fields = ["id", "username", "presence"]


    class PostSerializer(serializers.ModelSerializer):
        author_presence = PresenceField(source="author_id")  # a user id: no query for the user


    class MemberList(generics.ListAPIView):
        queryset = User.objects.order_by("username")
        serializer_class = MemberSerializer
        filter_backends = [OnlineFilter]  # ?online=1: only those online

A list (``many=True``, a page of a paginated view) reads the presence of every item in one
Redis round trip, whatever its length: the first item's field reads the whole list's. Each
presence is read as ``request.user`` may see it: invisible users, and users outside the
viewer's ``AUDIENCE``, read as offline (no request in the context: as a signed-out visitor).
With Redis away every user reads offline and the response is still served.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers
from rest_framework.filters import BaseFilterBackend

from .. import presence
from ..core.rules import user_key
from ..failopen import breaker
from ..store import UNAVAILABLE, Presence

__all__ = ["OnlineFilter", "PresenceField", "viewer_of"]

#: Where a root serializer keeps the presences it read: {user id: Presence}.
CACHE = "_presence_cache"


def viewer_of(request: Any) -> presence.Viewer:
    """Whom the answer is for: the signed-in user, else a signed-out visitor."""
    return presence.viewer(getattr(request, "user", None))


def read_many(user_ids: Iterable[str], viewer: Any) -> dict[str, Presence]:
    """``get_many`` that fails open: everybody offline while Redis is away."""
    ids = list(dict.fromkeys(user_ids))
    if ids and not breaker.is_open:
        try:
            return presence.get_many(ids, viewer=viewer, activity=True)
        except UNAVAILABLE as exc:
            breaker.trip(exc, "a presence serializer field")
    return {uid: Presence(uid) for uid in ids}


class PresenceField(serializers.Field):
    """A user's presence, read-only: ``{"user", "state", "last_seen", "last_active",
    "message", "emoji", "device", "last_seen_approx"}`` (``last_seen``, ``last_active``: unix
    seconds or null; ``last_seen_approx``: "" or the rough bucket a user's privacy shows instead).

    ``source`` names the user or the user's id (``"*"`` when the serialized object is the
    user). ``fields`` picks the keys, e.g. ``PresenceField(source="*", fields=["state"])``.
    """

    def __init__(self, *, fields: Iterable[str] | None = None, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        super().__init__(**kwargs)
        self.keys = list(fields) if fields is not None else None

    def to_representation(self, value: Any) -> Any:
        uid = user_key(value)
        if uid is None:
            return None
        cache = self._cache()
        if uid not in cache:
            # First look at this list: the ids of every item in it, in one round trip.
            wanted = [uid, *(u for u in self._list_ids() if u not in cache)]
            cache.update(read_many(wanted, viewer_of(self.context.get("request"))))
        found = cache[uid].as_dict()
        return found if self.keys is None else {k: found[k] for k in self.keys}

    def _cache(self) -> dict[str, Presence]:
        root = self.root
        cache = getattr(root, CACHE, None)
        if cache is None:
            cache = {}
            setattr(root, CACHE, cache)
        return cache

    def _list_ids(self) -> list[str]:
        """The user ids this field will show for every item of the root list serializer (a
        nested serializer's field too, down one-to-one relations); [] outside a list."""
        root = self.root
        if not isinstance(root, serializers.ListSerializer) or root.instance is None:
            return []
        path: list[serializers.Field] = []  # the nested serializers between the item and us
        node = self.parent
        while node is not None and node is not root.child:
            if isinstance(node, serializers.ListSerializer) or node.parent is None:
                return []  # a list inside an item: read per item
            path.append(node)
            node = node.parent
        if node is None:
            return []
        ids = []
        for item in root.instance:
            obj = item
            for nested in reversed(path):
                try:
                    obj = nested.get_attribute(obj)
                except Exception:  # noqa: BLE001 - what DRF would raise later, for this item
                    obj = None
                if obj is None:
                    break
            if obj is None:
                continue
            try:
                key = user_key(self.get_attribute(obj))
            except Exception:  # noqa: BLE001 - as above: DRF reports it when it gets there
                continue
            if key is not None:
                ids.append(key)
        return ids


class OnlineFilter(BaseFilterBackend):
    """``?online=1`` keeps the objects whose user is online as ``request.user`` may see them
    (``AUDIENCE``, invisible users out). The view may set ``presence_user_field`` (default
    ``"pk"``: a queryset of users; ``"author_id"`` for posts), ``presence_online_param``
    (default ``"online"``) and ``presence_online_limit`` (default 10,000: the most recently
    seen online users considered; one round trip, one ``AUDIENCE`` call per 1,000)."""

    param = "online"
    limit = 10_000

    def filter_queryset(self, request: Any, queryset: QuerySet, view: Any) -> QuerySet:
        param = getattr(view, "presence_online_param", self.param)
        wanted = request.query_params.get(param, "").lower()
        if wanted not in ("1", "true", "yes", "on"):
            return queryset
        field = getattr(view, "presence_user_field", "pk")
        limit = int(getattr(view, "presence_online_limit", self.limit))
        ids: list[str] = []
        if not breaker.is_open:
            try:
                ids = presence.online(limit=limit, viewer=viewer_of(request))
            except UNAVAILABLE as exc:
                breaker.trip(exc, "the online filter")
        model = queryset.model
        target = model._meta.pk if field == "pk" else model._meta.get_field(field)
        if getattr(target, "remote_field", None) is not None:
            target = target.target_field  # author_id / author: the user's primary key
        pks = []
        for uid in ids:
            try:
                pks.append(target.to_python(uid))
            except Exception:  # noqa: BLE001 - an id this field cannot hold matches nothing
                continue
        return queryset.filter(**{f"{field}__in": pks})
