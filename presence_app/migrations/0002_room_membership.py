import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("presence_app", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="RoomMembership",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True,
                        primary_key=True,
                        serialize=False,
                        verbose_name="ID",
                    ),
                ),
                ("room", models.CharField(db_index=True, max_length=100, verbose_name="room")),
                ("joined_at", models.DateTimeField(auto_now_add=True, verbose_name="joined at")),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="presence_rooms",
                        to=settings.AUTH_USER_MODEL,
                        verbose_name="user",
                    ),
                ),
            ],
            options={
                "verbose_name": "room membership",
                "verbose_name_plural": "room memberships",
                "ordering": ["room", "joined_at"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("user", "room"), name="presence_room_member_once"
                    )
                ],
            },
        ),
    ]
