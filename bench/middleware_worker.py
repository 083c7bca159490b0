"""Benchmark 7's processes (the driver: bench/middleware.py; settings: middleware_settings.py).

    python -m bench.middleware_worker prepare '<json>'    the SQLite file: users and sessions
    python -m bench.middleware_worker inprocess '<json>'  Django's WSGI and ASGI handlers, with and
                                                          without PresenceMiddleware, in turn
    python -m bench.middleware_worker load '<json>'       the HTTP client for the uvicorn servers

Each prints one JSON line. The module is also the URLconf: one trivial authenticated view.
"""

from __future__ import annotations

import asyncio
import gc
import io
import itertools
import json
import sys
import time

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.urls import path

from .common import cpu_seconds

PATH = "/page/"
EVALS = ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_fcall")
WARM_FEW = 50  # warm-up requests of a side whose throttle needs no warming
#: Seconds a server needs to write its last batch of touches (HEARTBEAT_FLUSH_INTERVAL <= 1 s).
FLUSH_WAIT = 1.3


@login_required
def page(request):
    return HttpResponse(f"hello {request.user.pk}", content_type="text/plain")


urlpatterns = [path(PATH.strip("/") + "/", page)]


def setup() -> None:
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.middleware_settings")
    django.setup()


def script_calls(stats: dict) -> int:
    """Script calls in an INFO commandstats reply (every presence write is one)."""
    return sum(int(stats.get(name, {}).get("calls", 0)) for name in EVALS)


def redis_writes(client) -> int:
    """Script calls Redis has run so far."""
    return script_calls(client.info("commandstats"))


def verify(prefix: str, user_ids: list[str], since: float | None = None) -> dict:
    """Through the public API, on the key prefix ``prefix``: how many of the users are online,
    and how many were seen (written) since ``since`` (a Unix time)."""
    from django.conf import settings
    from django.test.utils import override_settings

    from presence_app import presence

    with override_settings(PRESENCE={**settings.PRESENCE, "KEY_PREFIX": prefix}):
        got = presence.get_many(user_ids, viewer=presence.TRUSTED)
        return {
            "prefix": prefix,
            "users": len(user_ids),
            "online_count": presence.online_count(),
            "users_online": sum(1 for p in got.values() if p.is_online),
            "seen_since_block_start": None
            if since is None
            else sum(1 for p in got.values() if (p.last_seen or 0) >= since),
        }


# -- prepare ------------------------------------------------------------------------------------
def prepare(config: dict) -> dict:
    setup()
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command
    from django.db import transaction

    call_command("migrate", verbosity=0, interactive=False)
    n = config["users"]
    users = []
    for i in range(n):
        user = User(username=f"bench{i}")
        user.set_unusable_password()
        users.append(user)
    User.objects.bulk_create(users, batch_size=1000)
    keys, ids = [], []
    with transaction.atomic():
        for user in User.objects.order_by("pk"):
            session = SessionStore()
            session[SESSION_KEY] = str(user.pk)
            session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
            session[HASH_SESSION_KEY] = user.get_session_auth_hash()
            session.create()
            keys.append(session.session_key)
            ids.append(str(user.pk))
    return {"session_keys": keys, "user_ids": ids}


# -- in process: Django's own handlers -----------------------------------------------------------
def inprocess(config: dict) -> dict:
    setup()
    import redis
    from django.conf import settings
    from django.core.handlers.asgi import ASGIHandler
    from django.core.handlers.wsgi import WSGIHandler
    from django.test.utils import override_settings

    from presence_app.jobs.touches import batcher

    from .middleware_settings import MIDDLEWARE_WITH, MIDDLEWARE_WITHOUT

    cookies = [f"sessionid={k}" for k in config["session_keys"]]
    rounds, seconds = config["rounds"], config["seconds"]
    r = redis.Redis.from_url(settings.REDIS_URL)

    def build_handlers() -> dict[str, tuple]:
        """Fresh handlers (a fresh PresenceMiddleware: an empty throttle) for each side."""
        handlers = {}
        for side, stack in (("with", MIDDLEWARE_WITH), ("without", MIDDLEWARE_WITHOUT)):
            settings.MIDDLEWARE = stack  # read when a handler loads its middleware
            handlers[side] = (WSGIHandler(), ASGIHandler())
        return handlers

    # Sync: the WSGI handler called with a prepared environ, the response read and closed.
    base_environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": PATH,
        "QUERY_STRING": "",
        "SCRIPT_NAME": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "127.0.0.1",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    status: list[str] = []

    def start_response(s, headers, exc_info=None):
        status.append(s)

    def sync_round(handler, users: itertools.cycle, secs: float) -> tuple[int, float]:
        count, t0 = 0, time.perf_counter()
        deadline = t0 + secs
        while True:
            environ = dict(base_environ)
            environ["HTTP_COOKIE"] = next(users)
            environ["wsgi.input"] = io.BytesIO(b"")
            status.clear()
            response = handler(environ, start_response)
            b"".join(response)
            response.close()
            if status[0] != "200 OK":
                raise RuntimeError(f"WSGI answered {status[0]}")
            count += 1
            t1 = time.perf_counter()
            if t1 >= deadline:
                return count, t1 - t0

    # Async: the ASGI handler driven by a minimal server (one request at a time).
    async def asgi_call(handler, cookie: str) -> None:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": PATH,
            "raw_path": PATH.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1"), (b"cookie", cookie.encode())],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }
        sent = [False]
        out: dict = {}

        async def receive():
            if not sent[0]:
                sent[0] = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await asyncio.Future()  # no disconnect: waits until the handler cancels it

        async def send(message):
            if message["type"] == "http.response.start":
                out["status"] = message["status"]

        await handler(scope, receive, send)
        if out.get("status") != 200:
            raise RuntimeError(f"ASGI answered {out.get('status')}")

    async def async_round(handler, users: itertools.cycle, secs: float) -> tuple[int, float]:
        count, t0 = 0, time.perf_counter()
        deadline = t0 + secs
        while True:
            await asgi_call(handler, next(users))
            count += 1
            t1 = time.perf_counter()
            if t1 >= deadline:
                return count, t1 - t0

    import uvloop

    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)

    def measure(handlers: dict[str, tuple], path_name: str) -> dict:
        users = itertools.cycle(cookies)
        index = 0 if path_name == "wsgi" else 1

        def one(side: str, secs: float) -> tuple[int, float]:
            handler = handlers[side][index]
            if index == 0:
                return sync_round(handler, users, secs)
            return loop.run_until_complete(async_round(handler, users, secs))

        # Warm up: every user once with the middleware (its throttle learns them; every user
        # is written in this block), a few requests without.
        for side, count in (("with", len(cookies)), ("without", WARM_FEW)):
            for _ in range(count):
                one(side, 0.0)
        batcher.flush()  # the warm-up's touches: written before the rounds count writes
        per: dict[str, dict[str, list]] = {
            s: {"rates": [], "writes_per_request": [], "cpu_us_per_request": []} for s in handlers
        }
        for rnd in range(rounds):
            order = ("with", "without") if rnd % 2 == 0 else ("without", "with")
            for side in order:
                gc.collect()
                before, cpu = redis_writes(r), time.process_time()
                count, elapsed = one(side, seconds)
                if side == "with":
                    # What the background thread has not written yet: off the request path
                    # (not in the timed round), but this process's work (in its CPU time).
                    batcher.flush()
                cpu = time.process_time() - cpu
                per[side]["rates"].append(count / elapsed)
                per[side]["cpu_us_per_request"].append(cpu / count * 1e6)
                per[side]["writes_per_request"].append((redis_writes(r) - before) / count)
        return per

    def own_time() -> dict:
        """PresenceMiddleware alone: microseconds per call (median of the rounds), around a
        view that returns at once, on requests the rest of the stack has already seen
        (session read, user loaded), for as many users as the rounds use. In the cold case
        every call hands a touch to the batch, whose thread writes it off the request path."""
        from django.contrib.auth.middleware import AuthenticationMiddleware
        from django.contrib.sessions.middleware import SessionMiddleware
        from django.core.handlers.wsgi import WSGIRequest

        from presence_app.middleware import PresenceMiddleware

        requests = []
        for cookie in cookies:
            environ = {**base_environ, "HTTP_COOKIE": cookie, "wsgi.input": io.BytesIO(b"")}
            request = WSGIRequest(environ)
            SessionMiddleware(lambda r: None).process_request(request)
            AuthenticationMiddleware(lambda r: None).process_request(request)
            if not request.user.is_authenticated:  # loads the user, as login_required does
                raise RuntimeError("a benchmark session has no user")
            requests.append(request)
        response = HttpResponse("hello")
        middleware = PresenceMiddleware(lambda request: response)
        users = itertools.cycle(requests)
        for _ in range(len(requests)):  # warm: the steady throttle learns every user
            middleware(next(users))
        batcher.flush()
        per_call, touched = [], []
        for _ in range(rounds):
            gc.collect()
            count, t0 = 0, time.perf_counter()
            while count < 20 * len(requests):
                middleware(next(users))
                count += 1
            per_call.append((time.perf_counter() - t0) / count * 1e6)
            touched.append(len(batcher.pending))  # what the calls handed to the batch
            batcher.flush()
        return {
            "us_per_request": sorted(per_call)[len(per_call) // 2],
            "rounds": per_call,
            "touches_queued": touched,
        }

    prefix, ids = settings.PRESENCE["KEY_PREFIX"], config["user_ids"]
    results: dict[str, dict] = {}
    since = time.time()
    handlers = build_handlers()
    results["steady"] = {p: measure(handlers, p) for p in ("wsgi", "asgi")}
    results["steady"]["own"] = own_time()
    results["steady_verify"] = verify(prefix, ids, since)
    cold = {**settings.PRESENCE, "TOUCH_INTERVAL": config["cold_touch_interval"]}
    since = time.time()
    with override_settings(PRESENCE=cold):
        handlers = build_handlers()
        results["cold"] = {p: measure(handlers, p) for p in ("wsgi", "asgi")}
        results["cold"]["own"] = own_time()
    results["cold_verify"] = verify(prefix, ids, since)
    loop.close()
    return results


# -- the load client for the uvicorn servers ------------------------------------------------------
class Conn:
    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def get(self, request: bytes) -> None:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        code = lines[0].split(b" ", 2)[1]
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length:
            await self.reader.readexactly(length)
        if code != b"200":
            raise RuntimeError(f"server on port {self.port} answered {code.decode()}")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def _load(config: dict) -> dict:
    import redis.asyncio as aredis

    requests = [
        f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: sessionid={k}\r\n\r\n".encode()
        for k in config["session_keys"]
    ]
    servers = config["servers"]  # name -> {"port", "pid", "prefix"}
    r = aredis.Redis.from_url(config["redis_url"])
    conns: dict[str, list[Conn]] = {}
    for name, server in servers.items():
        conns[name] = [Conn(server["port"]) for _ in range(config["connections"])]
        await asyncio.gather(*(c.open() for c in conns[name]))
    users = itertools.cycle(requests)
    timeout = config["request_timeout"]

    async def drive(name: str, seconds: float | None, total: int | None) -> tuple[int, float]:
        """Every connection of server ``name`` sends requests in turn (keep-alive, one in
        flight each) for ``seconds``, or until ``total`` requests were sent."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        stop = t0 + (seconds or 0)
        done = [0]

        async def worker(conn: Conn) -> None:
            if total is not None:
                while done[0] < total:
                    done[0] += 1
                    await asyncio.wait_for(conn.get(next(users)), timeout)
            else:
                while loop.time() < stop:
                    await asyncio.wait_for(conn.get(next(users)), timeout)
                    done[0] += 1

        await asyncio.gather(*(worker(c) for c in conns[name]))
        return done[0], loop.time() - t0

    async def writes() -> int:
        return script_calls(await r.info("commandstats"))

    out: dict[str, dict] = {}
    for block in config["blocks"]:  # {"name": "steady", "with": server, "without": server}
        sides = {"with": block["with"], "without": block["without"]}
        out[block["name"] + "_since"] = time.time()
        # Warm up as in process: every user once with the middleware, a few requests without.
        await drive(sides["with"], None, len(requests))
        await drive(sides["without"], None, WARM_FEW)
        await asyncio.sleep(FLUSH_WAIT)  # the warm-up's touches, written before the rounds
        per = {s: {"rates": [], "writes_per_request": [], "cpu_us_per_request": []} for s in sides}
        for rnd in range(config["rounds"]):
            order = ("with", "without") if rnd % 2 == 0 else ("without", "with")
            for side in order:
                pid = servers[sides[side]]["pid"]
                before, cpu = await writes(), cpu_seconds(pid)
                count, elapsed = await drive(sides[side], config["seconds"], None)
                if side == "with" and block["name"] != "steady":
                    # The server's last batch of touches (steady: none; waiting would outlast
                    # the throttle's TOUCH_INTERVAL across the rounds).
                    await asyncio.sleep(FLUSH_WAIT)
                per[side]["rates"].append(count / elapsed)
                per[side]["cpu_us_per_request"].append((cpu_seconds(pid) - cpu) / count * 1e6)
                per[side]["writes_per_request"].append((await writes() - before) / count)
        out[block["name"]] = per
    for group in conns.values():
        for c in group:
            c.close()
    await r.aclose()
    return out


def load(config: dict) -> dict:
    import uvloop

    result = uvloop.run(_load(config))
    setup()  # Django only now, for the public API's reading of what the servers wrote
    ids = config["user_ids"]
    result["verify"] = {}
    for block in config["blocks"]:
        for side in ("with", "without"):
            prefix = config["servers"][block[side]]["prefix"]
            result["verify"][f"{block['name']} {side}"] = verify(
                prefix, ids, result[block["name"] + "_since"]
            )
    return result


def main() -> None:
    command, config = sys.argv[1], json.loads(sys.argv[2])
    result = {"prepare": prepare, "inprocess": inprocess, "load": load}[command](config)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
