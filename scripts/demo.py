"""Serves the demo: a private Redis (unless REDIS_URL), migrations, demo users, uvicorn."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")


def main() -> None:
    from presence_app.testing import RedisUnavailable, _is_free, ensure_redis_url

    host, port = "127.0.0.1", int(os.environ.get("PORT", "8000"))
    if not _is_free(port):
        sys.exit(f"Port {port} is in use (another demo?). Pick another: PORT={port + 1} make run")
    try:
        url = ensure_redis_url()
    except RedisUnavailable as exc:
        sys.exit(f"presence_app demo: {exc}")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    call_command("demo_users")
    import uvicorn

    print(f"Redis: {url}\nThe demo: http://{host}:{port}/  (Ctrl-C stops it)", flush=True)
    uvicorn.run(
        "project.asgi:application", host=host, port=port, log_level="warning", lifespan="off"
    )


if __name__ == "__main__":
    main()
