"""The peer's side of benchmark 8, in a process of its own (its own Django settings):
django-channels-presence's model approach under the same heartbeat load.

The package (its maintained fork ``django-channels-presence-4.0``, the one that installs on
Django 5) keeps a ``Presence`` row per (room, channel) and renews it on every heartbeat with
``Presence.objects.touch(channel_name)``: one ``UPDATE ... SET last_seen = now() WHERE
channel_name = %s``, in its own transaction (Django's autocommit). This worker calls that very
method, from the installed package, over ``connections`` presences spread over ``rooms`` rooms.

    python -m bench.peer_worker '<json config>'   -> prints one JSON line
"""

from __future__ import annotations

import json
import secrets
import sys
import time


def setup(config: dict) -> None:
    import django
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        USE_TZ=True,
        SECRET_KEY="bench",
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "channels_presence"],
        DATABASES={"default": config["database"]},
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
    )
    django.setup()


def main() -> None:
    config = json.loads(sys.argv[1])
    setup(config)
    from importlib.metadata import version

    from channels_presence.models import Presence, Room
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    n, rooms, seconds = config["connections"], config["rooms"], config["seconds"]
    call_command("migrate", verbosity=0, interactive=False)
    table = Presence._meta.db_table
    if config["index"]:
        with connection.cursor() as cur:
            cur.execute(f"CREATE INDEX bench_presence_channel ON {table} (channel_name)")
    User = get_user_model()
    User.objects.bulk_create([User(username=f"user{i}") for i in range(n)], batch_size=2000)
    users = list(User.objects.order_by("pk"))
    Room.objects.bulk_create([Room(channel_name=f"room{i}") for i in range(rooms)], batch_size=2000)
    room_objs = list(Room.objects.order_by("pk"))
    # Channel names as channels-redis makes them: "specific.<hex>!<random>".
    prefix = f"specific.{secrets.token_hex(16)}!"
    names = [prefix + secrets.token_urlsafe(9) for _ in range(n)]
    Presence.objects.bulk_create(
        [
            Presence(room=room_objs[i % rooms], channel_name=names[i], user=users[i])
            for i in range(n)
        ],
        batch_size=2000,
    )
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:  # what autovacuum would have done by then
            cur.execute(f"ANALYZE {table}")
    with connection.cursor() as cur:
        prefix_sql = "EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN "
        cur.execute(
            f"{prefix_sql}UPDATE {table} SET last_seen = %s WHERE channel_name = %s",
            [None, names[0]],
        )
        plan = " / ".join(" ".join(str(c) for c in row) for row in cur.fetchall())

    touch = Presence.objects.touch
    for i in range(min(200, n)):  # warm up
        touch(names[i])
    count, i = 0, 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    started = None
    from django.utils.timezone import now

    started = now()
    while True:
        touch(names[i])
        count += 1
        i = i + 1 if i + 1 < n else 0
        if count % 16 == 0 and time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - t0
    renewed = Presence.objects.filter(last_seen__gte=started).count()
    print(
        json.dumps(
            {
                "heartbeats": count,
                "seconds": elapsed,
                "rate": count / elapsed,
                "renewed_rows": renewed,
                "plan": plan,
                "vendor": connection.vendor,
                "package": "django-channels-presence-4.0 "
                + version("django-channels-presence-4.0"),
                "django": version("django"),
            }
        )
    )


if __name__ == "__main__":
    main()
