"""The documentation against the code: the settings table's defaults, the WebSocket page's
frames and events, the system checks' hints (they must make sense after a pip install)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.checks import run_checks
from django.test import override_settings

from presence_app import conf, consumers
from presence_app.core import dispatch
from presence_app.realtime import frames, protocol
from presence_app.store import Transition

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SETTING_ROW = re.compile(r"^\| `([A-Z_]+)` \| `(.*?)` \|", re.M)


def documented_defaults() -> dict[str, object]:
    rows = SETTING_ROW.findall((DOCS / "settings.md").read_text())
    return {name: ast.literal_eval(value.replace("\\|", "|")) for name, value in rows}


def test_settings_table_has_every_default_in_plain_markdown():
    # The defaults are written in the table itself (GitHub shows the Markdown as it is), and
    # must be presence_app.conf's: the same settings, the same values.
    documented = documented_defaults()
    assert sorted(documented) == sorted(conf.DEFAULTS)
    assert documented == conf.DEFAULTS


def server_frame_types() -> set[str]:
    """Every ``type`` the server puts in a frame to the browser: the protocol's own frames, the
    events dispatch builds, the transitions' events and what the consumer relays."""
    found: set[str] = set()
    for module in (protocol, dispatch):
        found |= set(re.findall(r'"type": "([a-z.]+)"', inspect.getsource(module)))
    found |= {
        Transition(kind=kind, user_id="1", state="online", at=0.0).as_event()["type"]
        for kind in ("online", "offline", "update", "join", "leave")
    }
    relayed = {
        name.replace("_", ".")
        for name, _ in inspect.getmembers(consumers.PresenceConsumerMixin, inspect.isfunction)
        if re.fullmatch(r"presence_[a-z]+", name)
        and name not in {"presence_connect", "presence_disconnect", "presence_receive"}
        and name not in {"presence_send"}
    }
    # The user's own group's events that change what the connection is in (join a permanent
    # room, leave a revoked one) or end it (the user was forgotten): never relayed as they are.
    return (found | relayed) - frames.OWN_EVENTS - {"presence.forgotten"}


def test_every_frame_both_ways_is_documented():
    page = (DOCS / "websocket.md").read_text()
    client = set(frames.HANDLERS)
    server = server_frame_types()
    # What the search must find, so that it cannot quietly find nothing.
    assert {"heartbeat", "join", "status", "watch"} <= client
    assert {"hello", "heartbeat.ack", "presence.state", "presence.message", "error"} <= server
    missing = sorted(t for t in client if f'"type": "{t}"' not in page)
    assert missing == [], f"client frames missing from docs/websocket.md: {missing}"
    missing = sorted(t for t in server if f"| `{t}` |" not in page)
    assert missing == [], f"server frames missing from docs/websocket.md: {missing}"


def test_every_presence_js_event_and_call_is_documented():
    script = (ROOT / "presence_app/static/presence_app/presence.js").read_text()
    page = (DOCS / "websocket.md").read_text()
    events = set(re.findall(r'_emit\("([a-z]+)"', script))
    assert {"message", "direct", "open"} <= events
    assert sorted(e for e in events if f"`{e}`" not in page) == []
    for call in ("send(frame)", "join(room)", "setStatus(", "watch(ids)", "typing(room)"):
        assert call in page


def hints(**setting):
    with override_settings(**setting):
        return {m.id: m.hint or "" for m in run_checks() if m.id.startswith("presence_app.")}


@pytest.mark.parametrize(
    "setting, check",
    [
        (
            {
                "CHANNEL_LAYERS": {
                    "default": {
                        "BACKEND": "channels_redis.core.RedisChannelLayer",
                        "CONFIG": {"hosts": ["redis://127.0.0.1:6379/0"]},
                    }
                }
            },
            "presence_app.W003",
        ),
        ({"PRESENCE": {"CLUSTER": True, "SHARDS": 1}}, "presence_app.W004"),
        ({"PRESENCE": {"LEASE_TTLS": 90}}, "presence_app.W002"),
        ({"PRESENCE": {"NO_SUCH_THING_AT_ALL": 1}}, "presence_app.W002"),
    ],
)
def test_check_hints_need_no_file_a_pip_install_lacks(setting, check):
    if "PRESENCE" in setting:
        setting = {"PRESENCE": {**settings.PRESENCE, **setting["PRESENCE"]}}
    found = hints(**setting)
    assert check in found
    hint = found[check]
    assert hint
    assert "docs/" not in hint and "README" not in hint and ".md" not in hint


def test_no_hint_in_the_source_names_a_file_a_pip_install_lacks():
    # The test above runs four checks; this reads every hint the package writes (a check's, an
    # error's), whatever makes it appear: the text of each hint= argument, its f-string parts too.
    naming = []
    for path in (ROOT / "presence_app").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "hint":
                text = " ".join(
                    n.value
                    for n in ast.walk(node.value)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str)
                )
                if "docs/" in text or "README" in text or ".md" in text:
                    naming.append(f"{path.relative_to(ROOT)}:{node.value.lineno}")
    assert naming == []


def test_unknown_setting_hint_names_the_setting_meant():
    found = hints(PRESENCE={**settings.PRESENCE, "LEASE_TTLS": 90})
    assert found["presence_app.W002"] == "Did you mean LEASE_TTL?"


def test_settings_page_lists_each_check_once():
    # docs/settings.md's table of system checks (the one list: the README points to it): every
    # check the app can report, each once, each with its explanation.
    table = (DOCS / "settings.md").read_text()
    rows = re.findall(r"^\| `presence_app\.([EW]\d{3})` \| (.*?) \|$", table, re.M)
    ids = [check for check, _ in rows]
    assert "W004" in ids
    assert len(ids) == len(set(ids))
    assert all(explanation.strip() for _, explanation in rows)
    defined = {
        found
        for path in (ROOT / "presence_app").rglob("*.py")
        for found in re.findall(r'id="presence_app\.([EW]\d{3})"', path.read_text())
    }
    assert "W004" in defined
    assert sorted(ids) == sorted(defined)


@pytest.mark.parametrize(
    "page", ["api.md", "templatetags.md", "signals.md", "websocket.md", "drf.md"]
)
def test_reference_pages_explain_before_the_autodoc(page):
    text = (DOCS / page).read_text()
    before = text.split("```{eval-rst}")[0]
    prose = re.sub(r"```.*?```", "", before, flags=re.S)
    assert len(prose.split()) > 150, "a reference page needs prose, not only autodoc"
    assert re.search(r"```(python|django|html|javascript)\n", before), "and an example"


#: A dotted path the README or the docs name: ``presence_app.x.y`` (a module, then attributes).
DOTTED = re.compile(r"\bpresence_app(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
#: ``from presence_app[.x] import a, b`` in a code block.
FROM_IMPORT = re.compile(r"^\s*from (presence_app[\w.]*) import ([\w, ]+)", re.M)
#: Check ids (presence_app.E001) and model labels are names, not import paths.
NOT_A_PATH = re.compile(r"\.(?:[EW]\d{3}|lastseen|roommembership)$")


def documented_paths() -> set[str]:
    texts = [(ROOT / "README.md").read_text()]
    texts += [p.read_text() for p in sorted(DOCS.glob("*.md")) if p.name != "changelog.md"]
    texts += [p.read_text() for p in sorted(DOCS.glob("*.py"))]
    found: set[str] = set()
    for text in texts:
        found |= {m for m in DOTTED.findall(text) if not NOT_A_PATH.search(m)}
        for module, names in FROM_IMPORT.findall(text):
            found |= {f"{module}.{name.strip()}" for name in names.split(",") if name.strip()}
    return found


def resolve(path: str) -> object:
    """The object a dotted path names: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as exc:
            if not (exc.name or "").startswith("presence_app"):
                pytest.skip(f"{path} needs {exc.name}, an optional extra")
            continue
        for name in parts[cut:]:
            target = getattr(target, name)
        return target
    raise ModuleNotFoundError(path)


def test_the_documentation_names_the_public_paths():
    # The paths a project copies from the README must stay among those checked below.
    assert {
        "presence_app.presence",
        "presence_app.consumers.PresenceConsumerMixin",
        "presence_app.routing.websocket_urlpatterns",
        "presence_app.urls",
        "presence_app.middleware.PresenceMiddleware",
        "presence_app.signals.user_offline",
        "presence_app.testing.RedisSentinelGroup",
        "presence_app.failopen.ChannelLayerOutageFilter",
    } <= documented_paths()


@pytest.mark.parametrize("path", sorted(documented_paths()))
def test_every_documented_import_path_imports(path):
    """Each ``presence_app...`` path the README and the docs teach names something real, so a
    moved module cannot leave a page pointing at nothing."""
    assert resolve(path) is not None


def test_the_drf_sample_shows_every_key_of_a_presence():
    """docs/drf.md's sample member has the keys PresenceField gives (last_seen_approx was
    missing), and so does the field's docstring."""
    import json

    from presence_app.store import Presence

    from ..doc_blocks import code_blocks

    (sample,) = code_blocks("drf.md", "json")
    keys = list(Presence("7").as_dict())
    assert list(json.loads(sample)["presence"]) == keys
    source = (ROOT / "presence_app/contrib/drf.py").read_text()
    docstring = source.split("class PresenceField", 1)[1].split('"""')[1]
    assert all(f'"{key}"' in docstring for key in keys)
