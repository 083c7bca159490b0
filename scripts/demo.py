"""Serves the demo: a private Redis (unless REDIS_URL), migrations, demo users, uvicorn."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")


def main() -> None:
    from presence_app.testing import ensure_redis_url

    url = ensure_redis_url()
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    call_command("demo_users")
    import uvicorn

    host, port = "127.0.0.1", int(os.environ.get("PORT", "8000"))
    print(f"Redis: {url}\nThe demo: http://{host}:{port}/  (Ctrl-C stops it)", flush=True)
    uvicorn.run("project.asgi:application", host=host, port=port, log_level="warning", lifespan="off")


if __name__ == "__main__":
    main()
