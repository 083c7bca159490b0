import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="LastSeen",
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
                ("last_seen_at", models.DateTimeField(db_index=True, verbose_name="last seen at")),
                ("device", models.CharField(blank=True, max_length=64, verbose_name="last device")),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="presence_last_seen",
                        to=settings.AUTH_USER_MODEL,
                        verbose_name="user",
                    ),
                ),
            ],
            options={
                "verbose_name": "last seen",
                "verbose_name_plural": "last seen",
                "ordering": ["-last_seen_at"],
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
    ]
