"""LastSeen: the durable "last seen" of each user (live presence stays in Redis)."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from .store import MAX_DEVICE_LENGTH


class LastSeen(models.Model):
    """When a user was last online, as the public saw it (an invisible user's stays frozen).

    Written on offline transitions and by the periodic bulk flush (``presence flush``), never
    per request or heartbeat; read when Redis no longer knows the user.
    """

    user = models.OneToOneField(
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


class RoomMembership(models.Model):
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
    room = models.CharField(_("room"), max_length=100, db_index=True)
    joined_at = models.DateTimeField(_("joined at"), auto_now_add=True)

    class Meta:
        ordering = ["room", "joined_at"]
        verbose_name = _("room membership")
        verbose_name_plural = _("room memberships")
        constraints = [
            models.UniqueConstraint(fields=["user", "room"], name="presence_room_member_once"),
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


class LastSeenPrivacy(models.Model):
    """Who may see a user's last seen, and how exactly (a row only for users who chose).

    ``visible_to``: ``everyone`` who may see the user at all, their ``audience`` (signed-in
    viewers the ``AUDIENCE`` policy admits; never a signed-out visitor) or ``nobody``.
    ``approximate``: "recently", "within a week", "within a month" instead of the time.
    Online users show online either way: this is about when they were last seen.
    """

    EVERYONE, AUDIENCE, NOBODY = "everyone", "audience", "nobody"
    CHOICES = [(EVERYONE, _("everyone")), (AUDIENCE, _("my audience")), (NOBODY, _("nobody"))]

    user = models.OneToOneField(
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

    def __str__(self) -> str:
        return f"{self.user}: {self.visible_to}{' (approximate)' if self.approximate else ''}"
