"""The durable presence rows: last seen, permanent room memberships, last-seen privacy choices
(live presence stays in Redis).

Every row belongs to one workspace (:mod:`presence_app.tenants`): its ``workspace`` column holds
the tenant key ("" for the default space) and is part of the row's unique constraint, so a user
has one row of each kind per workspace, and no workspace's row stands for another's. ``objects``
reads and writes the current workspace's rows only (a new row takes the current workspace);
``all_workspaces`` sees them all, for the code that must (erasure, export).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from .core import tenants
from .core.rules import pk_of
from .store import MAX_DEVICE_LENGTH


class InWorkspace(models.Manager):
    """The rows of the current workspace (``tenants.current()``), and no other."""

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().filter(workspace=tenants.column())


class WorkspaceRow(models.Model):
    """A row of one workspace: the ``workspace`` column and the two managers."""

    workspace = models.CharField(
        _("workspace"),
        max_length=64,
        blank=True,
        default=tenants.column,
        editable=False,
        help_text=_("The tenant key the row belongs to; empty for a site without workspaces."),
    )

    objects = InWorkspace()
    all_workspaces = models.Manager()  # noqa: DJ012 (a manager, after the default one)

    class Meta:
        abstract = True

    def validate_constraints(self, exclude: Any = None) -> None:
        """The workspace is part of every constraint but never a form's field: check it too."""
        super().validate_constraints(exclude=set(exclude or ()) - {"workspace"})


class LastSeen(WorkspaceRow):
    """When a user was last online in a workspace, as the public saw it (an invisible user's
    stays frozen).

    Written on offline transitions and by the periodic bulk flush (``presence flush``), never
    per request or heartbeat; read when Redis no longer knows the user.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="presence_last_seen",
        verbose_name=_("user"),
    )
    last_seen_at = models.DateTimeField(_("last seen at"), db_index=True)
    device = models.CharField(_("last device"), max_length=MAX_DEVICE_LENGTH, blank=True)

    class Meta:
        ordering = ["-last_seen_at"]
        verbose_name = _("last seen")
        verbose_name_plural = _("last seen")
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "user"],
                name="presence_last_seen_once",
                violation_error_message=_("This user has a last seen in this workspace already."),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.last_seen_at:%Y-%m-%d %H:%M}"


class PresenceDashboard(LastSeen):
    """No data of its own: puts the live dashboard on the admin index (see admin.py).

    It has no permissions of its own either: who may view LastSeen may open the dashboard.
    """

    class Meta:
        proxy = True
        default_permissions = ()
        verbose_name = _("live dashboard")
        verbose_name_plural = _("live dashboard")


class RoomMembership(WorkspaceRow):
    """A user's membership of a permanent room (a Slack channel, not a live document).

    Live presence stays in Redis; this row only says "bob belongs to #general": each of bob's
    connections joins the room when it opens, and the room's member list shows him while he is
    offline, with his last seen (see presence_app/rooms.py).
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="presence_rooms",
        verbose_name=_("user"),
    )
    room = models.CharField(_("room"), max_length=100)
    joined_at = models.DateTimeField(_("joined at"), auto_now_add=True)

    class Meta:
        ordering = ["room", "joined_at"]
        verbose_name = _("room membership")
        verbose_name_plural = _("room memberships")
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "user", "room"],
                name="presence_room_member_once",
                violation_error_message=_("This user is a member of this room already."),
            ),
        ]
        indexes = [
            models.Index(fields=["workspace", "room", "joined_at"], name="presence_room_members"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.room}"

    def clean(self) -> None:
        """The room name every entry point admits (``ROOM_NAME_PATTERN``), in their words."""
        from .core.rules import room
        from .store import InvalidInput

        try:
            room(self.room)
        except InvalidInput as exc:
            raise ValidationError({"room": str(exc)}) from None


class LastSeenPrivacy(WorkspaceRow):
    """Who may see a user's last seen, and how exactly (a row only for users who chose).

    ``visible_to``: ``everyone`` who may see the user at all, their ``audience`` (signed-in
    viewers the ``AUDIENCE`` policy admits; never a signed-out visitor) or ``nobody``.
    ``approximate``: "recently", "within a week", "within a month" instead of the time.
    Online users show online either way: this is about when they were last seen.
    """

    EVERYONE, AUDIENCE, NOBODY = "everyone", "audience", "nobody"
    CHOICES = [(EVERYONE, _("everyone")), (AUDIENCE, _("my audience")), (NOBODY, _("nobody"))]

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="presence_privacy",
        verbose_name=_("user"),
    )
    visible_to = models.CharField(
        _("last seen visible to"), max_length=16, choices=CHOICES, default=EVERYONE
    )
    approximate = models.BooleanField(_("approximate last seen"), default=False)

    class Meta:
        verbose_name = _("last seen privacy")
        verbose_name_plural = _("last seen privacy")
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "user"],
                name="presence_privacy_once",
                violation_error_message=_("This user has a choice in this workspace already."),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user}: {self.visible_to}{' (approximate)' if self.approximate else ''}"


ROW_MODELS: tuple[type[WorkspaceRow], ...] = (LastSeen, RoomMembership, LastSeenPrivacy)


def workspaces_with_rows(user_id: str) -> set[str | None]:
    """The workspaces (tenant keys, None for the default space) where ``user_id`` has a row."""
    pk = pk_of(user_id)
    if pk is None:
        return set()
    found: set[str | None] = set()
    for model in ROW_MODELS:
        rows = model.all_workspaces.filter(user_id=pk).values_list("workspace", flat=True)
        found.update(tenants.from_column(w) for w in rows.distinct())
    return found


aworkspaces_with_rows = sync_to_async(workspaces_with_rows)


def rows_of(user_id: str) -> dict[str, Any]:
    """The rows of ``user_id`` in the current workspace, as JSON-ready data: their last seen,
    their permanent rooms and their last-seen privacy choice."""
    pk = pk_of(user_id)
    if pk is None:
        return {"last_seen": None, "permanent_rooms": [], "privacy": None}
    seen = LastSeen.objects.filter(user_id=pk).first()
    choice = LastSeenPrivacy.objects.filter(user_id=pk).first()
    return {
        "last_seen": None
        if seen is None
        else {"at": seen.last_seen_at.isoformat(), "device": seen.device},
        "permanent_rooms": [
            {"room": m.room, "joined_at": m.joined_at.isoformat()}
            for m in RoomMembership.objects.filter(user_id=pk)
        ],
        "privacy": None
        if choice is None
        else {"last_seen": choice.visible_to, "approximate": choice.approximate},
    }


def forget_rows(user_id: str) -> None:
    """Deletes every row of ``user_id`` in the current workspace."""
    pk = pk_of(user_id)
    if pk is not None:
        for model in ROW_MODELS:
            model.objects.filter(user_id=pk).delete()
