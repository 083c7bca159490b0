"""The app's tables: LastSeen, RoomMembership and LastSeenPrivacy, each row in one workspace
(``workspace``: the tenant key, "" for a site without tenants, part of every unique
constraint), and the dashboard's proxy. The app had not been released: one migration."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import presence_app.core.tenants


def workspace():
    return models.CharField(
        blank=True,
        default=presence_app.core.tenants.column,
        editable=False,
        help_text="The tenant key the row belongs to; empty for a site without workspaces.",
        max_length=64,
        verbose_name="workspace",
    )


def key():
    return models.BigAutoField(
        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
    )


def user(related_name):
    return models.ForeignKey(
        on_delete=django.db.models.deletion.CASCADE,
        related_name=related_name,
        to=settings.AUTH_USER_MODEL,
        verbose_name="user",
    )


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="LastSeen",
            fields=[
                ("id", key()),
                ("workspace", workspace()),
                ("last_seen_at", models.DateTimeField(db_index=True, verbose_name="last seen at")),
                ("device", models.CharField(blank=True, max_length=64, verbose_name="last device")),
                ("user", user("presence_last_seen")),
            ],
            options={
                "verbose_name": "last seen",
                "verbose_name_plural": "last seen",
                "ordering": ["-last_seen_at"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("workspace", "user"),
                        name="presence_last_seen_once",
                        violation_error_message=(
                            "This user has a last seen in this workspace already."
                        ),
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="PresenceDashboard",
            fields=[],
            options={
                "verbose_name": "live dashboard",
                "verbose_name_plural": "live dashboard",
                "proxy": True,
                "default_permissions": (),
                "indexes": [],
                "constraints": [],
            },
            bases=("presence_app.lastseen",),
        ),
        migrations.CreateModel(
            name="RoomMembership",
            fields=[
                ("id", key()),
                ("workspace", workspace()),
                ("room", models.CharField(max_length=100, verbose_name="room")),
                ("joined_at", models.DateTimeField(auto_now_add=True, verbose_name="joined at")),
                ("user", user("presence_rooms")),
            ],
            options={
                "verbose_name": "room membership",
                "verbose_name_plural": "room memberships",
                "ordering": ["room", "joined_at"],
                "indexes": [
                    models.Index(
                        fields=["workspace", "room", "joined_at"], name="presence_room_members"
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("workspace", "user", "room"),
                        name="presence_room_member_once",
                        violation_error_message="This user is a member of this room already.",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="LastSeenPrivacy",
            fields=[
                ("id", key()),
                ("workspace", workspace()),
                (
                    "visible_to",
                    models.CharField(
                        choices=[
                            ("everyone", "everyone"),
                            ("audience", "my audience"),
                            ("nobody", "nobody"),
                        ],
                        default="everyone",
                        max_length=16,
                        verbose_name="last seen visible to",
                    ),
                ),
                (
                    "approximate",
                    models.BooleanField(default=False, verbose_name="approximate last seen"),
                ),
                ("user", user("presence_privacy")),
            ],
            options={
                "verbose_name": "last seen privacy",
                "verbose_name_plural": "last seen privacy",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("workspace", "user"),
                        name="presence_privacy_once",
                        violation_error_message=(
                            "This user has a choice in this workspace already."
                        ),
                    )
                ],
            },
        ),
    ]
